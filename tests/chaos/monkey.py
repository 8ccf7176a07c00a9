"""The chaos driver: SIGKILL a random service every few seconds and restart it, crash Redis
once, and notice any service that dies without being killed.

Every random choice (the pause before each fault, the victim, how long it stays down) is
drawn from one seeded RNG before the run, so a seed names the same sequence of faults; the
interleaving with the load (and which faults fit in the run) still depends on timing.
"""

from __future__ import annotations

import asyncio
import random
import signal
import time
from dataclasses import dataclass, field

from shared.service import sleep_or_stop
from tests.chaos.stack import SERVICES, Stack


@dataclass(frozen=True, slots=True)
class Tick:
    wait: float  # seconds before this fault
    victim: str  # a service name, or "redis"
    down: float  # seconds it stays down before the restart


@dataclass
class ChaosRecord:
    kills: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SERVICES, 0))
    redis_crashed_at: float | None = None  # monotonic
    redis_down_seconds: float = 0.0
    unexpected_exits: list[str] = field(default_factory=list)
    restart_failures: list[str] = field(default_factory=list)


def plan(rng: random.Random, ticks: int, every: tuple[float, float] = (1.5, 3.5)) -> list[Tick]:
    """``ticks`` service kills, each service once per round (in a shuffled order), plus
    one Redis crash after about 40% of them."""
    victims: list[str] = []
    while len(victims) < ticks:
        victims += rng.sample(SERVICES, len(SERVICES))
    victims = victims[:ticks]
    victims.insert(int(ticks * 0.4), "redis")
    faults = []
    for victim in victims:
        down = rng.uniform(0.5, 1.5) if victim == "redis" else rng.uniform(0.2, 1.0)
        faults.append(Tick(round(rng.uniform(*every), 2), victim, round(down, 2)))
    return faults


class Monkey:
    def __init__(self, stack: Stack, faults: list[Tick]) -> None:
        self.stack = stack
        self.faults = faults
        self.record = ChaosRecord()
        self.down: set[str] = set()  # killed, not yet restarted

    async def run(self, stop: asyncio.Event) -> None:
        """Fault after fault until ``stop``; restarts run in the background, so a kill may
        land while another service (or Redis) is still coming back."""
        restarts: set[asyncio.Task[None]] = set()
        for tick in self.faults:
            await sleep_or_stop(stop, tick.wait)
            if stop.is_set():
                break
            await self.restart_unexpected_exits()
            if tick.victim in self.down:
                continue  # still restarting from the last fault: leave it be
            self.down.add(tick.victim)
            if tick.victim == "redis":
                restart = self.crash_redis(tick.down)
            else:
                restart = self.kill_and_restart(tick.victim, tick.down)
            task = asyncio.create_task(restart)
            restarts.add(task)
            task.add_done_callback(restarts.discard)
        await asyncio.gather(*restarts)

    async def kill_and_restart(self, name: str, down: float) -> None:
        service = self.stack[name]
        await service.kill()
        self.record.kills[name] += 1
        await asyncio.sleep(down)
        await self._start(name)
        self.down.discard(name)

    async def crash_redis(self, down: float) -> None:
        server = self.stack.redis_server
        self.record.redis_crashed_at = time.monotonic()
        await asyncio.to_thread(server.crash)
        await asyncio.sleep(down)
        await server.start_async()
        self.record.redis_down_seconds = time.monotonic() - self.record.redis_crashed_at
        self.down.discard("redis")

    async def restart_unexpected_exits(self) -> None:
        """A service that exited on its own (a crash, a crash loop) is a finding: note it
        with its last log lines, then restart it so the run can go on."""
        for name in SERVICES:
            if name in self.down:
                continue
            process = self.stack[name].process
            code = process.returncode if process is not None else None
            if code is not None and code != -signal.SIGKILL:
                self.record.unexpected_exits.append(
                    f"{name} exited {code}:\n{self.stack[name].tail(15)}"
                )
                await self._start(name)

    async def _start(self, name: str) -> None:
        try:
            await self.stack[name].start(90)
        except RuntimeError as error:  # not ready in time: keep going, report it
            self.record.restart_failures.append(f"{name}: {error}")

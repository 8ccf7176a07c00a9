"""The pacer on a virtual clock: what its arithmetic costs, apart from the machine's load.

The storm benchmark (benchmarks/storm.py) runs every real process on this shared machine,
so its drain is the pacer's and the load's together. This runs the pacer's own scripts
(``pace_acquire.lua``, ``pace_feedback.lua``) on a real redis-server, their ``now`` given
from a virtual clock, and mirrors what ``services/sender/pacer.py`` does around them per
sender replica (a batch of slots per round trip, asked for again half a horizon before the
last one; a slot more than a burst late dropped; a long wait cut short by an accepted send;
a 429 voiding the replica's slots). The provider is the sandbox's token bucket
(``services/sandbox/ratelimit.py``) on the same clock. Each slot's send reaches it
``--latency`` ms later (drawn per send) and is answered ``--rtt`` ms after that; with
``--stall-every MS`` a stall of about ``--stall`` ms comes that often on average, half of
them the provider's (it reads what arrived meanwhile at the stall's end, as a sandbox that is
not scheduled does) and half a sender's (its sends wait, then go together). Each worker
holds one of N operations, taken in queue order; a 429'd one is queued again after
``--retry`` ms (the sandbox's ``Retry-After: 1``, which the operation honours) and the
promoter's tick, so a 429 near the end of the drain delays it, as in the storm. Each run
says where the drain lost time: the first 3 s (the slow start, the descent to the rate), the
steady run, and the tail (beyond the last sends' own time, once only 429s' retries were
left). Runs are deterministic per seed, and take seconds whatever the load.

    .venv/bin/python benchmarks/pacing_sim.py                          # ceiling 1.5 x 200/s
    .venv/bin/python benchmarks/pacing_sim.py --ceiling 200 --stall-every 2000
    .venv/bin/python benchmarks/pacing_sim.py --tune recover_ms 0 --seeds 6   # no way back
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import itertools
import random
import sys
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from services.ctl.embedded import RedisServer
from services.sandbox.ratelimit import TokenBucket
from services.sender import pacing
from services.sender.pacer import NO_ADVICE_MAX_MS
from services.sender.settings import SenderSettings
from shared.model import Outcome
from shared.providers.base import SendResult
from shared.scripts.pacing import Observation, PaceAcquire, PaceFeedback, Tuning

PROVIDER = "sim"
BURST = SenderSettings.model_fields["provider_burst"].default
WORKERS = SenderSettings.model_fields["concurrency"].default
FLOOR = SenderSettings.model_fields["provider_min_rate"].default


@dataclass
class Replica:
    """One sender process's side of the pacing (services/sender/pacer.py)."""

    rate: float
    slots: list[float] = field(default_factory=list)
    epoch: int = 0
    reserved_until: float = 0.0
    accepted: int = 0
    waiting: list[int] = field(default_factory=list)
    asking: bool = False
    long_wait: bool = False
    starting: bool = False
    turn: int = 0  # the refill due; a newer one makes it void
    stalled_until: float = 0.0


class Storm:
    def __init__(self, args: argparse.Namespace, client: Redis, tuning: Tuning, seed: int):
        self.args, self.client, self.tuning = args, client, tuning
        self.rng = random.Random(seed)
        self.now = 0.0  # ms
        self.events: list[tuple[float, int, Callable[..., Awaitable[None]], tuple[Any, ...]]]
        self.events = []
        self.order = itertools.count()
        self.bucket = TokenBucket(args.rate, args.depth, clock=lambda: self.now / 1000)
        self.accepted = self.refused = 0
        self.per_second: dict[int, list[int]] = {}
        self.provider_stalled_until = 0.0
        self.replicas = [Replica(args.ceiling) for _ in range(args.replicas)]
        self.ready = deque(range(args.n))  # operations queued, in stream order
        self.idle: list[tuple[Replica, int]] = []  # workers waiting for an operation
        self.op: dict[tuple[int, int], int] = {}  # the operation each worker holds
        self.dry_at = 0.0  # when the queue first ran dry (the rest wait out retries)
        self.left_at_dry = 0  # operations not yet accepted then

    def at(self, when: float, step: Callable[..., Awaitable[None]], *args: Any) -> None:
        heapq.heappush(self.events, (when, next(self.order), step, args))

    def burst_ms(self, replica: Replica) -> float:
        return BURST * 1000 / replica.rate

    async def want_op(self, replica: Replica, worker: int) -> None:
        """A worker takes the next operation from the queue, then waits for a slot for it;
        with none ready (the rest wait out a 429's retry) it idles until one is."""
        if not self.ready:
            if not self.dry_at:
                self.dry_at, self.left_at_dry = self.now, self.args.n - self.accepted
            self.idle.append((replica, worker))
            return
        self.op[(id(replica), worker)] = self.ready.popleft()
        await self.want_slot(replica, worker)

    async def due(self, op: int) -> None:
        """A throttled operation's retry is due (promoted to the stream again)."""
        self.ready.append(op)
        if self.idle:
            await self.want_op(*self.idle.pop(0))

    async def want_slot(self, replica: Replica, worker: int) -> None:
        while replica.slots:
            slot = replica.slots.pop(0)
            if slot - self.now < -self.burst_ms(replica):
                continue  # its moment passed unused
            self.at(max(self.now, slot), self.fire, replica, worker, slot, replica.epoch)
            return
        replica.waiting.append(worker)
        if not replica.asking:
            replica.asking = True
            ahead = replica.reserved_until - self.now - self.tuning.horizon_ms / 2
            replica.long_wait = ahead > 0 and replica.starting  # cut short when accepted
            self.ask_at(replica, self.now + max(0.0, ahead))

    def ask_at(self, replica: Replica, when: float) -> None:
        replica.turn += 1
        self.at(when, self.ask, replica, replica.turn)

    async def ask(self, replica: Replica, turn: int) -> None:
        if turn != replica.turn:
            return
        if self.now < replica.stalled_until:
            return self.ask_at(replica, replica.stalled_until)
        accepted, replica.accepted = replica.accepted, 0
        slots = await PaceAcquire(
            provider=PROVIDER,
            tuning=self.tuning,
            now=int(self.now),
            ceiling=self.args.ceiling,
            burst=BURST,
            want=max(1, len(replica.waiting)),
            accepted=accepted,
        ).run(self.client)
        replica.rate, replica.starting = slots.rate, slots.starting
        replica.long_wait = False
        if not slots.count:
            wait = slots.wait_ms
            if wait > self.tuning.horizon_ms or slots.starting:  # cut short when accepted
                wait, replica.long_wait = min(wait, 1000), True
            return self.ask_at(replica, self.now + wait)
        times = slots.times_ms()
        replica.slots.extend(times)
        replica.reserved_until = times[-1]
        replica.asking = False
        waiting, replica.waiting = replica.waiting, []
        for worker in waiting:
            await self.want_slot(replica, worker)

    async def fire(self, replica: Replica, worker: int, slot: float, epoch: int) -> None:
        if self.now < replica.stalled_until:  # woken late: it still sends
            return self.at(replica.stalled_until, self.fire, replica, worker, slot, epoch)
        if epoch != replica.epoch:  # a 429 voided it while it waited
            return await self.want_slot(replica, worker)
        latency = self.rng.uniform(*self.args.latency)
        self.at(self.now + latency, self.arrive, replica, worker, slot)

    async def arrive(self, replica: Replica, worker: int, slot: float) -> None:
        if self.now < self.provider_stalled_until:
            return self.at(self.provider_stalled_until, self.arrive, replica, worker, slot)
        taken = self.bucket.take() == 0.0
        counts = self.per_second.setdefault(int(self.now // 1000), [0, 0])
        counts[0 if taken else 1] += 1
        self.accepted += taken
        self.refused += not taken
        rtt = self.rng.uniform(self.args.rtt / 2, self.args.rtt)
        self.at(self.now + rtt, self.answer, replica, worker, slot, taken)

    async def answer(self, replica: Replica, worker: int, slot: float, taken: bool) -> None:
        result = SendResult(Outcome.ACCEPTED if taken else Outcome.THROTTLED)
        op = self.op.pop((id(replica), worker))
        if not taken:  # Retry-After: 1 is its own retry time, then the promoter's tick
            retry = self.args.retry + self.rng.uniform(0, self.args.promote)
            self.at(self.now + retry, self.due, op)
        if taken:
            replica.accepted += 1
            if replica.long_wait:
                replica.long_wait = False
                self.ask_at(replica, self.now)
        no_advice = min(self.burst_ms(replica), NO_ADVICE_MAX_MS)
        seen = pacing.observe(result, slot, int(self.now), FLOOR, no_advice)
        if seen.matters(replica.rate):
            await self.feedback(replica, seen)
        if self.accepted < self.args.n:
            self.at(self.now + self.args.work, self.want_op, replica, worker)

    async def feedback(self, replica: Replica, seen: Observation) -> None:
        if seen.throttled or seen.blocked_until > seen.now:
            replica.epoch += 1
            seen = replace(seen, returned_ms=len(replica.slots) * 1000 / replica.rate)
            replica.slots.clear()
            replica.reserved_until = 0.0
        accepted, replica.accepted = replica.accepted, 0
        adjusted = await PaceFeedback(
            provider=PROVIDER,
            tuning=self.tuning,
            seen=replace(seen, accepted=accepted),
            floor=FLOOR,
        ).run(self.client)
        replica.rate = adjusted.rate or replica.rate

    async def stall(self) -> None:
        length = self.rng.uniform(0.5, 1.5) * self.args.stall
        if self.rng.random() < 0.5:
            self.provider_stalled_until = self.now + length
        else:
            self.rng.choice(self.replicas).stalled_until = self.now + length
        self.at(self.now + self.rng.expovariate(1 / self.args.stall_every), self.stall)

    def losses(self, drain: float) -> str:
        """Where the drain lost time against the provider's rate: the first seconds (the
        slow start and the descent to the rate), the steady run, and the tail (from the
        moment the queue ran dry, only 429s' retries are left)."""
        start_s, rate = 3, self.args.rate
        taken = {s: counts[0] for s, counts in self.per_second.items()}
        start = sum(rate - taken.get(s, 0) for s in range(start_s)) / rate
        dry = self.dry_at / 1000 if self.dry_at else drain
        tail = drain - dry - self.left_at_dry / rate
        steady = drain - self.args.n / rate - start - tail
        return f"start {start:.2f} s, steady {steady:.2f} s, tail {tail:.2f} s"

    async def run(self) -> float:
        """Seconds until the provider took N sends."""
        for replica in self.replicas:
            for worker in range(self.args.workers):
                self.at(self.rng.uniform(0, 50), self.want_op, replica, worker)
        if self.args.stall_every:
            self.at(self.rng.expovariate(1 / self.args.stall_every), self.stall)
        while self.events and self.accepted < self.args.n:
            self.now, _, step, args = heapq.heappop(self.events)
            await step(*args)
        return self.now / 1000


async def main(args: argparse.Namespace) -> None:
    tuning = Tuning(**{k: type(getattr(Tuning(), k))(v) for k, v in args.tune})
    server = RedisServer().start()
    client = Redis.from_url(server.url, decode_responses=True)
    ideal = args.n / args.rate
    tuned = ", ".join(f"{k}={v}" for k, v in args.tune)
    stalls = "no stalls"
    if args.stall_every:
        stalls = f"a stall of ~{args.stall:g} ms every ~{args.stall_every:g} ms"
    print(
        f"N={args.n} at {args.rate:g}/s (bucket {args.depth}), ceiling {args.ceiling:g}/s, "
        f"{args.replicas} senders x {args.workers} workers, tuning {tuned or 'default'}, "
        f"{stalls}"
    )
    ratios, refusals = [], []
    try:
        for seed in range(args.seed, args.seed + args.seeds):
            await client.flushall()
            storm = Storm(args, client, tuning, seed)
            drain = await storm.run()
            ratios.append(drain / ideal)
            refusals.append(storm.refused)
            print(
                f"seed {seed}: drain {drain:.2f} s, {drain / ideal:.3f} x ideal, "
                f"{storm.refused} 429s ({100 * storm.refused / args.n:.2f} % of N); "
                f"lost: {storm.losses(drain)}"
            )
            if args.timeline:
                for second, (taken, refused) in sorted(storm.per_second.items()):
                    print(f"   {second:>4} s  {taken:>5} taken  {refused:>3} 429s")
    finally:
        await client.aclose()
        server.stop()
    print(
        f"mean {sum(ratios) / len(ratios):.3f} x ideal, "
        f"{sum(refusals) / len(refusals):.0f} 429s per run"
    )


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("-n", type=int, default=10_000, help="sends to deliver (10000)")
    parser.add_argument("--rate", type=float, default=200.0, help="provider sends/s (200)")
    parser.add_argument("--depth", type=int, default=10, help="provider bucket (10)")
    parser.add_argument("--ceiling", type=float, default=300.0, help="PROVIDER_MAX_RATE (300)")
    parser.add_argument("--replicas", type=int, default=2, help="sender processes (2)")
    parser.add_argument("--workers", type=int, default=WORKERS, help="per sender")
    parser.add_argument(
        "--latency",
        type=float,
        nargs=2,
        default=(1.0, 5.0),
        metavar=("MIN", "MAX"),
        help="ms from slot to provider",
    )
    parser.add_argument("--rtt", type=float, default=10.0, help="ms to the answer (5-10)")
    parser.add_argument("--work", type=float, default=1.0, help="ms between answer and ask")
    parser.add_argument("--retry", type=float, default=1000.0, help="ms a 429's op waits")
    parser.add_argument("--promote", type=float, default=250.0, help="ms promoter tick")
    parser.add_argument("--stall", type=float, default=60.0, help="ms a stall lasts (~60)")
    parser.add_argument("--stall-every", type=float, default=0.0, help="ms between (0: none)")
    parser.add_argument(
        "--tune",
        nargs=2,
        action="append",
        default=[],
        metavar=("FIELD", "VALUE"),
        help="a Tuning field, e.g. --tune recover_ms 0",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seeds", type=int, default=3, help="runs, one per seed (3)")
    parser.add_argument("--timeline", action="store_true", help="taken and 429s a second")
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse()))

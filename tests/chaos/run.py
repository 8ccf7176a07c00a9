"""One chaos run, start to verdict: the stack, the load, the faults, the settle, the audit.

Replay a run with the seed it prints: ``CHAOS_SEED=<seed> .venv/bin/python -m pytest ...``.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from shared import codec
from shared.admit import Admitter
from shared.redis import create_client
from shared.settings import PolicySettings
from shared.tokens import parse_keys
from tests.chaos import audit
from tests.chaos.crashable_redis import Crash
from tests.chaos.driver import Driver
from tests.chaos.monkey import Monkey, plan
from tests.chaos.stack import NO_FAULTS, PARTITIONS, SERVICES, Stack, running_stack
from tests.conftest import TEST_TOKEN_KEYS
from tests.support.sandbox import configure

DEFAULT_SEED = 20260701


def seed() -> int:
    return int(os.environ.get("CHAOS_SEED", DEFAULT_SEED))


@dataclass(frozen=True)
class Plan:
    operations: int
    duration: float  # seconds over which admissions are spread (chaos runs meanwhile)
    appendfsync: str
    crash: Crash
    seed: int
    settle_timeout: float
    log_level: str = "INFO"
    # Seconds between faults, drawn uniformly. The short runs draw them closer so that every
    # planned fault (each service killed once, the Redis crash) lands while the load runs.
    fault_every: tuple[float, float] = (1.5, 3.5)
    # The sandbox's fault rates over stack.FAULTS: a short run has too few sends for a 1 %
    # fault to be sure to fire at all.
    provider_faults: dict[str, float] = field(default_factory=dict)

    @property
    def budget(self) -> float:
        """The whole run's bound: load, settle, and room for startup and restarts."""
        return self.duration + self.settle_timeout + 180


@dataclass
class Verdict:
    report: dict[str, Any] = field(default_factory=dict)
    unsettled: dict[str, str] = field(default_factory=dict)
    ledger_problems: list[str] = field(default_factory=list)
    convergence_problems: list[str] = field(default_factory=list)
    unexpected_exits: list[str] = field(default_factory=list)
    lost: audit.Losses = field(default_factory=audit.Losses)
    emails: dict[str, Any] = field(default_factory=dict)


async def run(log_dir: Path, p: Plan) -> Verdict:
    rng = random.Random(p.seed)
    faults = plan(rng, ticks=max(5, int(p.duration / 2.5)), every=p.fault_every)
    print(
        f"chaos seed={p.seed} fsync={p.appendfsync} crash={p.crash} ops={p.operations} "
        f"logs={log_dir}",
        flush=True,
    )
    # Inside the test's own timeout, so that on expiry every process is still stopped.
    async with (
        asyncio.timeout(p.budget),
        running_stack(
            log_dir,
            appendfsync=p.appendfsync,
            crash=p.crash,
            accounts=p.operations,
            seed=p.seed,
            log_level=p.log_level,
            sandbox=p.provider_faults,
        ) as stack,
    ):
        return await _run_on(stack, p, rng, faults)


async def _run_on(stack: Stack, p: Plan, rng: random.Random, faults: list[Any]) -> Verdict:
    settings = PolicySettings(
        redis_url=stack.redis_server.url,
        token_keys=TEST_TOKEN_KEYS,
        partitions=PARTITIONS,
        cooldown_seconds=3600,
        redis_timeout_seconds=3,
    )
    client = create_client(settings)
    timeout = aiohttp.ClientTimeout(total=10)
    monkey = Monkey(stack, faults)
    started = time.monotonic()
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session:
            admitter = Admitter(client, settings, parse_keys(TEST_TOKEN_KEYS))
            driver = Driver(stack, admitter, client, session, rng)
            stop = asyncio.Event()
            chaos = asyncio.create_task(monkey.run(stop))
            await driver.run(p.operations, p.duration)
            load_seconds = time.monotonic() - started
            stop.set()
            await chaos
    finally:
        await client.aclose()
    await monkey.restart_unexpected_exits()
    await configure(stack.provider_url, **NO_FAULTS)
    settle_seconds, left = await audit.settle(stack.redis, p.settle_timeout)
    verdict = await _audit(stack, driver, monkey)
    verdict.unsettled = left
    verdict.report.update(
        load_seconds=round(load_seconds, 1),
        settle_seconds=round(settle_seconds, 1),
        faults_planned=len(faults),
    )
    print("chaos report " + codec.dumps_str(verdict.report), flush=True)
    return verdict


async def _audit(stack: Stack, driver: Driver, monkey: Monkey) -> Verdict:
    redis, acks, record = stack.redis, driver.acks, monkey.record
    operations = await audit.scan_operations(redis)
    cases = await audit.cases_by_event(redis)
    ledger_problems, ledger_tally = await audit.ledgers(redis, operations)
    verdict = Verdict(
        ledger_problems=ledger_problems,
        convergence_problems=audit.convergence_problems(acks, operations, cases),
        unexpected_exits=record.unexpected_exits + record.restart_failures,
        lost=await audit.losses(redis, acks, operations, cases, record.redis_crashed_at),
        emails=await audit.emails(stack.provider_url, operations),
    )
    states: dict[str, int] = {}
    for op in operations.values():
        states[op.state] = states.get(op.state, 0) + 1
    not_running = [name for name in SERVICES if not stack[name].running]
    verdict.report = {
        "acknowledged": {
            "operations": len(acks.operations),
            "public": len(acks.public),
            "forms": len(acks.forms),
            "follow_ups": acks.follow_ups,
            "retries": acks.retries,
            "gave_up": acks.gave_up,
        },
        "operations_in_store": len(operations),
        "states": dict(sorted(states.items())),
        "ledgers": dict(sorted(ledger_tally.items())),
        "kills": record.kills,
        "redis_down_seconds": round(record.redis_down_seconds, 2),
        "acknowledged_then_lost": {
            "operations": verdict.lost.operations,
            "public": verdict.lost.public,
            "forms": verdict.lost.forms,
            "oldest_lost_ack_before_crash_s": max(verdict.lost.ages, default=None),
        },
        "emails": verdict.emails,
        "not_running_at_end": not_running,
    }
    return verdict

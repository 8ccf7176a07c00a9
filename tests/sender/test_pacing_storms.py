"""Small storms on real sender processes: each pacing scenario of the storm benchmark in a
few seconds. Every one ends with 0 duplicates, 0 lost and a bounded number of 429s.

The sandbox is the provider (a token bucket, Retry-After in delay-seconds); the senders are
two ``python -m services.sender`` processes sharing the pacing schedule in Redis.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from shared.keys import SEND_GROUP, PartitionKeys
from shared.model import State
from shared.operations import load_operation
from tests.conftest import CLUSTER, TEST_TOKEN_KEYS
from tests.sender.conftest import Stack
from tests.support.processes import ServiceProcess
from tests.support.sandbox import SANDBOX_API_KEY, configure, sandbox_stats

# Timed storms: the Cluster pass runs beside the main pass on the same two cores, where their
# 429 bounds measure the machine's load, not the pacer. The pacing scripts themselves run on
# the Cluster in tests/sender/test_pacing.py.
pytestmark = pytest.mark.skipif(CLUSTER, reason="timed storms run in the main pass")

RATE = 50.0  # the provider's real rate in these storms (sends/s)
BURST = 5


def env(stack: Stack, ceiling: float, **extra: str) -> dict[str, str]:
    return {
        "RESETGATE_REDIS_URL": stack.redis_url,
        "RESETGATE_REDIS_CLUSTER": str(CLUSTER).lower(),
        "RESETGATE_PROVIDER_URL": stack.provider_url,
        "RESETGATE_PROVIDER_API_KEY": SANDBOX_API_KEY,
        "RESETGATE_TOKEN_KEYS": TEST_TOKEN_KEYS,
        "RESETGATE_PARTITIONS": "4",
        "RESETGATE_PROVIDER_MAX_RATE": str(ceiling),
        "RESETGATE_PROVIDER_BURST": str(BURST),
        "RESETGATE_LOG_LEVEL": "INFO",
        **extra,
    }


@asynccontextmanager
async def senders(
    stack: Stack, tmp_path: Path, ceiling: float, **extra: str
) -> AsyncIterator[list[ServiceProcess]]:
    base = env(stack, ceiling, **extra)
    started = [
        ServiceProcess(
            name, {**base, "RESETGATE_CONSUMER_NAME": name}, tmp_path, module="services.sender"
        )
        for name in ("sender-a", "sender-b")
    ]
    try:
        await asyncio.gather(*(s.start() for s in started))
        yield started
    finally:
        # Both at once: each graceful stop waits up to 2 s for its readers' blocked reads
        # (intake.READ_BLOCK_MS); one after the other they were 3-4 s of each storm's ~8.
        stopped = await asyncio.gather(*(s.stop() for s in started), return_exceptions=True)
        for outcome in stopped:  # every stop waited for; then the first error, if any
            if isinstance(outcome, BaseException):
                raise outcome


async def admit(stack: Stack, n: int) -> list[str]:
    return [await stack.admit(f"acct-storm-{i}") for i in range(n)]


async def drained(stack: Stack, ops: list[str], timeout: float) -> float:
    started = time.monotonic()
    pending = set(ops)
    while pending:
        if time.monotonic() - started > timeout:
            raise AssertionError(f"{len(pending)} operations not accepted in {timeout}s")
        for op in list(pending):
            operation = await load_operation(stack.redis, op)
            if operation and operation.state == State.ACCEPTED:
                pending.discard(op)
        await asyncio.sleep(0.05)
    return time.monotonic() - started


async def settled(stack: Stack, n: int) -> dict[str, int]:
    stats = await sandbox_stats(stack.provider_url)
    assert stats["duplicate_sends_total"] == 0
    assert stats["emails_sent_total"] == n  # every operation once: none lost, none twice
    return {"throttled": stats["send_throttled_total"]}


async def storm(stack: Stack, tmp_path: Path, n: int, ceiling: float, ideal: float) -> int:
    ops = await admit(stack, n)
    async with senders(stack, tmp_path, ceiling):
        elapsed = await drained(stack, ops, timeout=ideal * 4 + 10)
    result = await settled(stack, n)
    # What each bound is checked against, in the output of a repeated run (`-s`).
    print(f"\nstorm of {n} at ceiling {ceiling}/s: {result['throttled']} 429s, {elapsed:.2f} s")
    # A loaded CI machine stretches this; the benchmark holds the tight figure.
    assert elapsed < ideal * 3 + 5
    return result["throttled"]


@pytest.mark.serial  # its 429 bound measures the pacer only on an unloaded machine
async def test_ceiling_above_the_real_rate_converges_with_few_429s(
    stack: Stack, tmp_path: Path
) -> None:
    await configure(stack.provider_url, send_rate_per_second=RATE, send_burst=BURST)
    throttled = await storm(stack, tmp_path, 150, ceiling=RATE * 1.5, ideal=150 / RATE)
    assert throttled <= 150 * 0.15  # halving and a blocked second per 429 cost far more


@pytest.mark.serial  # its 429 bound measures the pacer only on an unloaded machine
async def test_ceiling_equal_to_the_real_rate_is_kept_without_429s(
    stack: Stack, tmp_path: Path
) -> None:
    await configure(stack.provider_url, send_rate_per_second=RATE, send_burst=BURST)
    throttled = await storm(stack, tmp_path, 150, ceiling=RATE, ideal=150 / RATE)
    assert throttled <= 150 * 0.05


@pytest.mark.serial  # its 429 bound measures the pacer only on an unloaded machine
async def test_a_rate_schedule_down_and_back_up_is_followed(stack: Stack, tmp_path: Path) -> None:
    await configure(stack.provider_url, send_rate_schedule="50:1.5,25:1.5,50", send_burst=BURST)
    n = 160  # 5 + 75 + 37 in the first three seconds, the rest at 50/s
    throttled = await storm(stack, tmp_path, n, ceiling=RATE, ideal=3 + (n - 117) / RATE)
    assert throttled <= n * 0.15


async def test_a_stopping_sender_hands_its_unstarted_jobs_back_at_once(
    stack: Stack, tmp_path: Path
) -> None:
    await configure(stack.provider_url, send_rate_per_second=RATE, send_burst=BURST)
    ops = await admit(stack, 200)
    # A lease far longer than the storm: a job left pending would show as a stall.
    async with senders(stack, tmp_path, RATE, RESETGATE_LEASE_SECONDS="60") as (a, _):
        await asyncio.sleep(1.0)
        await a.stop()  # SIGTERM mid-storm
        left_at = time.monotonic()
        before = (await sandbox_stats(stack.provider_url))["emails_sent_total"]
        handed = [r for r in a.log_records() if r.get("msg") == "unstarted jobs handed back"]
        assert sum(int(r.get("jobs", 0)) for r in handed) > 0
        for p in range(4):
            mine = await stack.redis.xpending_range(
                PartitionKeys(p).send, SEND_GROUP, "-", "+", 100, consumername="sender-a"
            )
            assert mine == []  # nothing left for a lease to free
        await asyncio.sleep(2.0)
        after = (await sandbox_stats(stack.provider_url))["emails_sent_total"]
        # The other sender went on with them at once: a second's worth, or all that was left
        # (on a loaded machine the graceful stop itself can take seconds of sending).
        assert after - before >= min(RATE, len(ops) - before)
        await a.start()  # and back again, as a rolling restart does
        remaining = await drained(stack, ops, timeout=30)
    await settled(stack, len(ops))
    # What was left (about 150 sends at 50/s) drains at the provider's rate, not a lease.
    assert remaining < 150 / RATE * 3 + 5
    assert time.monotonic() - left_at < 40

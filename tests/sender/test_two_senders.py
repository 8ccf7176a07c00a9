"""Two real sender processes on the same streams never attempt one operation at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import aiohttp
import pytest

from services.ctl.embedded import free_port
from shared.keys import JOB_FIELD, PartitionKeys
from shared.operations import load_attempts
from tests.conftest import CLUSTER, TEST_TOKEN_KEYS
from tests.sender.conftest import Stack, wait_for
from tests.support.sandbox import SANDBOX_API_KEY, configure, sandbox_stats

pytestmark = pytest.mark.cluster_pass  # also on a Redis Cluster: make test-cluster

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def sender_processes(stack: Stack, count: int) -> Iterator[list[int]]:
    """``count`` sender processes; yields their operational ports."""
    env = dict(
        os.environ,
        RESETGATE_REDIS_URL=stack.redis_url,
        RESETGATE_REDIS_CLUSTER=str(CLUSTER).lower(),
        RESETGATE_PROVIDER_URL=stack.provider_url,
        RESETGATE_PROVIDER_API_KEY=SANDBOX_API_KEY,
        RESETGATE_TOKEN_KEYS=TEST_TOKEN_KEYS,
        RESETGATE_PARTITIONS="4",
        RESETGATE_PROVIDER_MAX_RATE="1000",
        RESETGATE_PROVIDER_BURST="50",
        RESETGATE_CONCURRENCY="8",
        RESETGATE_LEASE_SECONDS="5",
        RESETGATE_TOTAL_TIMEOUT_SECONDS="2",
        RESETGATE_CONNECT_TIMEOUT_SECONDS="1",
        RESETGATE_LOG_LEVEL="WARNING",
    )
    ports = [free_port() for _ in range(count)]
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "services.sender"],
            cwd=ROOT,
            env=dict(env, RESETGATE_METRICS_PORT=str(port), RESETGATE_CONSUMER_NAME=f"sender-{i}"),
        )
        for i, port in enumerate(ports)
    ]
    try:
        yield ports
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            process.wait(timeout=30)


async def all_ready(ports: list[int]) -> bool:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
        for port in ports:
            try:
                async with session.get(f"http://127.0.0.1:{port}/readyz") as response:
                    if response.status != 200:
                        return False
            except (aiohttp.ClientError, TimeoutError):
                return False
    return True


async def test_invariant_10_two_senders_share_the_work_and_never_overlap(stack: Stack) -> None:
    # Slow provider: every attempt is in flight long enough for a second worker to collide.
    await configure(stack.provider_url, slow_probability=1.0, slow_seconds=0.2)
    with sender_processes(stack, 2) as ports:
        # Both ready before the work arrives: on a loaded machine one could otherwise start
        # after the other had sent everything, and "both did real work" would measure that.
        await wait_for(lambda: all_ready(ports), timeout=60)
        ops = [await stack.admit(f"acct-two-{i}") for i in range(120)]
        for op in ops[:40]:  # and every one of these jobs is delivered twice
            await stack.redis.xadd(PartitionKeys.of(op).send, {JOB_FIELD: op})
        for op in ops:
            await stack.wait_state(op, {"accepted"}, timeout=60)
    stats = await sandbox_stats(stack.provider_url)
    assert stats["conflicts_total"] == 0  # a 409 would mean two attempts of one key at once
    assert stats["duplicate_sends_total"] == 0
    assert stats["emails_sent_total"] == len(ops)
    consumers = set()
    for op in ops:
        [attempt] = await load_attempts(stack.redis, op)
        consumers.add(attempt.consumer)
    assert consumers == {"sender-0", "sender-1"}  # both did real work

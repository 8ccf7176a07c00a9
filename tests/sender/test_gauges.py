"""The oldest-eligible-age gauge: due-now work counts, deliberate deferrals do not."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from shared import clock
from shared.keys import CONTROL, PartitionKeys
from tests.sender.conftest import Stack, wait_for

pytestmark = pytest.mark.cluster_pass  # also on a Redis Cluster: make test-cluster


def gauge(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_waiting_work_ages_and_deliberate_deferrals_do_not(stack: Stack) -> None:
    waiting = await stack.admit("acct-age")
    p = PartitionKeys.of(waiting).partition
    await stack.redis.hset(CONTROL, f"paused:{p}", "{}")  # nothing is sent from p
    # A deliberate deferral an hour out in another partition: not eligible, not aged.
    other = next(i for i in range(4) if i != p)
    await stack.redis.zadd(PartitionKeys(other).due, {f"op-{other}-X": clock.now_ms() + 3_600_000})
    async with stack.sender():
        # Both gauges as one condition: the registry is the worker's, so a partition's gauge
        # can hold an earlier test's value until this sender's first pass reaches it.
        await wait_for(lambda: _aged_only(str(p), str(other)), timeout=30)
        assert gauge("resetgate_queue_depth", partition=str(p), queue="send") == 1
        assert gauge("resetgate_partition_paused", partition=str(p)) == 1


async def _aged_only(partition: str, other: str) -> bool:
    return await _aged(partition) and (
        gauge("resetgate_oldest_eligible_age_seconds", partition=other) == 0
        and gauge("resetgate_queue_depth", partition=other, queue="due") == 1
    )


async def _aged(partition: str) -> bool:
    return gauge("resetgate_oldest_eligible_age_seconds", partition=partition) >= 1.0

"""The poller's and the router's scripts and pipelines on a 3-master Redis Cluster: a key
built inside Lua, or two slots in one script, would fail here with CROSSSLOT."""

from __future__ import annotations

import pytest
from redis.asyncio import RedisCluster

from services.poller import observation
from services.poller.observation import Match
from services.router import cases
from shared import clock, ids
from shared.delivery import DeliveryEvent
from shared.keys import PartitionKeys
from shared.model import Delivery
from shared.scripts.observation import Applied, Lease
from shared.scripts.router import ClaimCode, RouteClaim

pytestmark = pytest.mark.cluster
PARTITIONS = 16


async def test_observation_scripts_and_pipelines_on_a_cluster(
    cluster_client: RedisCluster,
) -> None:
    now = clock.now_ms()
    ops = {}
    for p in range(PARTITIONS):  # 16 hash tags: spread over all three masters
        op, message = ids.operation_id(p), f"msg-{p}"
        pk = PartitionKeys(p)
        await cluster_client.hset(pk.operation(op), mapping={"state": "accepted"})
        await cluster_client.hset(pk.messages, message, op)
        await cluster_client.zadd(pk.observe, {op: now - 1 if p % 2 else now + 60_000})
        ops[message] = op
    found = await observation.operations_for(cluster_client, PARTITIONS, list(ops))
    assert found == ops
    events = [Match(DeliveryEvent(m, Delivery.DELIVERED, now), op) for m, op in ops.items()]
    outcomes = await observation.apply_events(cluster_client, events + events[:3], now)
    assert [o.result for o in outcomes].count(Applied.DUPLICATE) == 3
    closed = [
        await observation.close_due(cluster_client, p, now + 120_000) for p in range(PARTITIONS)
    ]
    assert sum(closed) == 0, "every window already ended with its delivered event"
    assert await observation.pending(cluster_client, PARTITIONS, now) == [0] * PARTITIONS
    assert await observation.forget_stale_messages(cluster_client, 3, 0) == (0, 0)
    assert await Lease(holder="a", lease_ms=5000).run(cluster_client)
    assert not await Lease(holder="b", lease_ms=5000).run(cluster_client)


async def test_router_claim_and_case_on_a_cluster(cluster_client: RedisCluster) -> None:
    claim = await RouteClaim(
        event_id="evt-1", case_id="case-1", now=1, ttl_ms=60_000, stale_ms=1000
    ).run(cluster_client)
    assert claim.code is ClaimCode.NEW
    entry = await cases.write_case(cluster_client, {"case_id": "case-1"}, 1000)
    await cases.mark_written(cluster_client, "evt-1", entry, 60_000)
    again = await RouteClaim(
        event_id="evt-1", case_id="case-2", now=2, ttl_ms=60_000, stale_ms=1000
    ).run(cluster_client)
    assert (again.code, again.case_id) == (ClaimCode.DONE, "case-1")
    assert await cases.find_case(cluster_client, "case-1", clock.now_ms()) == entry

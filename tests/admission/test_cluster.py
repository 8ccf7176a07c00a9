"""Every script admission runs (admit, consume_token, gcra) on a 3-master Redis Cluster.

The app is built exactly as ``RESETGATE_REDIS_CLUSTER=true`` builds it; a CROSSSLOT or a
key built inside Lua would surface here as a 503 store_unavailable instead of the answer.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from redis.asyncio import RedisCluster

from shared.directory import Account
from shared.keys import PartitionKeys, partition_of
from shared.tokens import parse_keys
from tests.admission.helpers import (
    ALICE,
    BEARER,
    admission_settings,
    consume,
    internal_admit,
    public,
    seed_directory,
    serving,
)
from tests.conftest import TEST_TOKEN_KEYS
from tests.support.redis_cluster import RedisClusterServers

pytestmark = pytest.mark.cluster

ACCOUNTS = [(f"player{i}", Account(f"acct-{i}", f"p{i}@example.com")) for i in range(12)]


def cluster_settings(cluster: RedisClusterServers, **overrides: Any) -> Any:
    return admission_settings(cluster.url, redis_cluster=True, partitions=16, **overrides)


async def test_admission_tokens_and_queries_on_a_cluster(
    cluster_client: RedisCluster, redis_cluster: RedisClusterServers
) -> None:
    await seed_directory(cluster_client, ALICE, *ACCOUNTS)
    keys = parse_keys(TEST_TOKEN_KEYS)
    async with serving(cluster_settings(redis_cluster)) as http:
        replies = await asyncio.gather(
            *(public(http, login) for login, _ in ACCOUNTS), public(http, "nobody@example.com")
        )
        assert {r.status for r in replies} == {202}
        again = await internal_admit(http, "acct-0")
        assert (await again.json())["result"] == "converged"
        ops, jobs = [], 0
        for partition in {partition_of(a.account_id, 16) for _, a in ACCOUNTS}:
            jobs += await cluster_client.xlen(PartitionKeys(partition).send)
            ops.extend(await cluster_client.zrange(PartitionKeys(partition).live, 0, -1))
        assert jobs == len(set(ops)) == len(ACCOUNTS)  # one job per account, none for "nobody"
        oldest = await (
            await http.get("/internal/v1/recovery-operations?oldest=50", headers=BEARER)
        ).json()
        assert sorted(r["operation_id"] for r in oldest["operations"]) == sorted(ops)
        detail = await http.get(f"/internal/v1/recovery-operations/{ops[0]}", headers=BEARER)
        assert detail.status == 200
        account = await http.get("/internal/v1/accounts/acct-0/recovery-operation", headers=BEARER)
        assert account.status == 200
        assert (await consume(http, ops[0], keys.derive(ops[0]))).status == 200
        assert (await consume(http, ops[0], keys.derive(ops[0]))).status == 409
        assert (await consume(http, ops[1], keys.derive(ops[0]))).status == 403


async def test_concurrent_admissions_converge_on_a_cluster(
    cluster_client: RedisCluster, redis_cluster: RedisClusterServers
) -> None:
    await seed_directory(cluster_client, ALICE)
    async with serving(cluster_settings(redis_cluster)) as http:
        replies = await asyncio.gather(
            *(internal_admit(http, ALICE[1].account_id) for _ in range(50))
        )
        bodies = [await r.json() for r in replies]
    assert len({b["operation_id"] for b in bodies}) == 1
    assert sum(b["created"] for b in bodies) == 1
    pk = PartitionKeys(partition_of(ALICE[1].account_id, 16))
    assert await cluster_client.xlen(pk.send) == 1


async def test_the_ip_limit_on_a_cluster(
    cluster_client: RedisCluster, redis_cluster: RedisClusterServers
) -> None:
    # One token a minute: a refill between the requests (60 a minute refilled one a second,
    # and a loaded machine once took longer than that for three) would let the third through.
    settings = cluster_settings(redis_cluster, ip_limit_per_minute=1, ip_limit_burst=2)
    async with serving(settings) as http:
        statuses = [(await public(http, "nobody")).status for _ in range(3)]
    assert statuses == [202, 202, 429]


async def test_wait_is_routed_to_the_node_holding_the_partition(
    cluster_client: RedisCluster, redis_cluster: RedisClusterServers
) -> None:
    """No replicas in this cluster: WAIT times out (503 not_replicated), never MOVED/CROSSSLOT."""
    await seed_directory(cluster_client, *ACCOUNTS)
    settings = cluster_settings(redis_cluster, wait_replicas=1, wait_timeout_ms=20)
    async with serving(settings) as http:
        for login in [login for login, _ in ACCOUNTS[:6]] + ["nobody@example.com"]:
            reply = await public(http, login)
            assert reply.status == 503
            assert (await reply.json())["error"] == "not_replicated"
        admitted = await internal_admit(http, "acct-7")
        assert (await admitted.json())["error"] == "not_replicated"
    # Written on the right node (one job per account), waiting for the client's retry.
    partitions = {partition_of(a.account_id, 16) for _, a in ACCOUNTS[:6]}
    jobs = [await cluster_client.xlen(PartitionKeys(p).send) for p in partitions]
    assert sum(jobs) == 6

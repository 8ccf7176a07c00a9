"""Sentinel: every service's client (and ``resetgate ops``) reaches the primary the Sentinels
name and follows a failover; readiness says "not ready" while there is no primary; a
keyless sender refuses replicas it would not WAIT for.

Real processes: a primary, a replica and three Sentinels (tests/support/redis_sentinel.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis.asyncio.connection import SSLConnection
from redis.asyncio.sentinel import SentinelManagedSSLConnection

from shared.fastredis import FastRedis, fast_client
from shared.keys import PREFIX
from shared.redis import RedisClient, SentinelRedis, create_client, ping
from shared.redis_policy import StoreNotDurable, check_keyless_replication
from shared.replication import Replicas
from shared.settings import CommonSettings
from tests.ctl.test_cli import resetgate
from tests.support.redis_sentinel import MASTER, SentinelDeployment

KEYLESS = {"postmark": "postmark"}
ACKED = f"{PREFIX}:test:acked"  # a key of the test's own, under the store's prefix


@pytest.fixture
def sentinels() -> Iterator[SentinelDeployment]:
    deployment = SentinelDeployment(appendonly=False).start()
    yield deployment
    deployment.stop()


def settings_for(deployment: SentinelDeployment) -> CommonSettings:
    return CommonSettings(
        redis_sentinels=deployment.addresses, redis_sentinel_master=MASTER, redis_timeout_seconds=2
    )


async def test_the_client_follows_a_failover_and_readiness_says_not_ready_meanwhile(
    sentinels: SentinelDeployment,
) -> None:
    settings = settings_for(sentinels)
    client = create_client(settings)
    try:
        replicas = Replicas(client, settings, count=1, timeout_ms=2000)
        async with replicas.connection(ACKED) as connection:
            await connection.set(ACKED, "1")
            await replicas.wait(connection)  # the replica has it before the primary dies
        killed = time.monotonic()
        sentinels.primary.stop(kill=True)
        answers = []
        while not (answers and answers[-1]):
            answers.append(await ping(client))
            if not answers[-1]:
                await asyncio.sleep(0.2)
            assert time.monotonic() - killed < 30, "no primary after 30 s"
        recovered = time.monotonic() - killed
        assert False in answers  # readiness said "not ready" while there was no primary
        assert sentinels.primary_port() == sentinels.replica.port
        assert await client.get(ACKED) == "1"  # the WAITed write survived
        assert await client.set(f"{PREFIX}:test:after", "1")
        print(f"sentinel failover: writes back after {recovered:.1f} s")
    finally:
        await client.aclose()


async def test_admission_fast_path_falls_back_to_plain_redis_py_under_sentinel(
    sentinels: SentinelDeployment,
) -> None:
    client = create_client(settings_for(sentinels))
    try:
        assert isinstance(client, SentinelRedis)
        kept: RedisClient = fast_client(client)
        assert kept is client and not isinstance(kept, FastRedis)
        assert await kept.ping()
    finally:
        await client.aclose()


async def test_a_keyless_sender_refuses_replicas_it_would_not_wait_for(
    sentinels: SentinelDeployment, caplog: pytest.LogCaptureFixture
) -> None:
    client = create_client(settings_for(sentinels))
    try:
        with pytest.raises(StoreNotDurable, match="RESETGATE_WAIT_REPLICAS") as refused:
            await check_keyless_replication(client, KEYLESS, 0, sentinel=False, require=True)
        assert "RESETGATE_KEYLESS_REQUIRE_REPLICA_WAIT=false" in str(refused.value)
        assert await check_keyless_replication(client, KEYLESS, 1, sentinel=True, require=True) == 1
        assert await check_keyless_replication(client, {}, 0, sentinel=True, require=True) is None
        with caplog.at_level(logging.ERROR):
            await check_keyless_replication(client, KEYLESS, 0, sentinel=True, require=False)
        assert any("failover could send emails twice" in r.msg for r in caplog.records)
    finally:
        await client.aclose()


async def test_a_lone_redis_with_a_keyless_provider_needs_no_wait(
    redis: RedisClient,
) -> None:
    assert await check_keyless_replication(redis, KEYLESS, 0, sentinel=False, require=True) == 0


def test_resetgate_ops_speaks_sentinel(sentinels: SentinelDeployment, tmp_path: Path) -> None:
    done = resetgate(
        "ops",
        "status",
        cwd=tmp_path,
        env={
            "RESETGATE_REDIS_SENTINELS": sentinels.addresses,
            "RESETGATE_REDIS_SENTINEL_MASTER": MASTER,
            "RESETGATE_PARTITIONS": "4",
        },
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == (
        f"redis: sentinel master {MASTER!r} (3 sentinels), from RESETGATE_REDIS_SENTINELS"
    )


async def test_sentinel_password_and_tls_reach_the_data_nodes_and_the_sentinels() -> None:
    """Built, not connected: the URL's password, database and TLS options go to the data
    connections; the Sentinel password and TLS (with the URL's ssl_* options) to the
    Sentinels."""
    settings = CommonSettings(
        redis_url="rediss://:data-pw@ignored:6379/2?ssl_ca_certs=/etc/redis-tls/ca.crt",
        redis_sentinels="s-0:26379,s-1:26379",
        redis_sentinel_master=MASTER,
        redis_sentinel_password="sentinel-pw",
        redis_sentinel_tls=True,
    )
    client = create_client(settings)
    try:
        assert isinstance(client, SentinelRedis) and client.sentinel_manager is not None
        pool = client.connection_pool
        assert pool.connection_class is SentinelManagedSSLConnection
        data = pool.connection_kwargs
        assert (data["password"], data["db"], data["ssl_ca_certs"]) == (
            "data-pw",
            2,
            "/etc/redis-tls/ca.crt",
        )
        assert "host" not in data  # the Sentinels name the primary
        sentinel = client.sentinel_manager.sentinels[0].connection_pool
        assert sentinel.connection_class is SSLConnection
        assert sentinel.connection_kwargs["password"] == "sentinel-pw"
        assert sentinel.connection_kwargs["ssl_ca_certs"] == "/etc/redis-tls/ca.crt"
    finally:
        await client.aclose()

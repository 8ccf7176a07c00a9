"""Every service checks Redis's maxmemory-policy when it connects: noeviction is quiet, an
evicting policy is a warning and a metric, and a Redis that refuses CONFIG GET (managed
Redis, here an ACL user without @admin, as such services answer) is "unknown", never a
failed start."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY
from redis.asyncio import Redis

from services.ctl.embedded import RedisServer
from shared.redis import connect
from shared.redis_policy import check_eviction_policy
from tests.conftest import make_settings
from tests.support.redis_acl import url_without_config

WARNING = "maxmemory-policy"


def policy_gauge(policy: str) -> float | None:
    return REGISTRY.get_sample_value("resetgate_redis_maxmemory_policy", {"policy": policy})


def warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == logging.WARNING and WARNING in r.msg]


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    server = RedisServer().start()
    yield server
    server.stop()


async def test_noeviction_is_quiet(
    own_redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    client = await connect(make_settings(own_redis.url, redis_cluster=False))
    await client.aclose()
    assert policy_gauge("noeviction") == 1
    assert not warnings(caplog)


async def test_an_evicting_policy_warns_at_connect_and_is_exported(
    own_redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    admin = Redis.from_url(own_redis.url)
    await admin.config_set("maxmemory-policy", "volatile-ttl")
    await admin.aclose()
    client = await connect(make_settings(own_redis.url, redis_cluster=False))
    await client.aclose()
    assert policy_gauge("volatile-ttl") == 1
    (record,) = warnings(caplog)
    assert "evicts keys" in record.msg
    assert record.fields["policy"] == "volatile-ttl"  # type: ignore[attr-defined]


async def test_a_refused_config_get_is_unknown_not_fatal(
    own_redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    url = await url_without_config(own_redis)
    client = await connect(make_settings(url, redis_cluster=False))
    try:
        assert await client.ping()
        assert await check_eviction_policy(client) == "unknown"
    finally:
        await client.aclose()
    assert policy_gauge("unknown") == 1
    assert warnings(caplog)

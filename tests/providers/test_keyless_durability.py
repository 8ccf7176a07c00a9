"""A provider without an idempotency key needs Redis to keep every acknowledged write.

The chaos run with Postmark under ``appendfsync everysec`` sent emails twice after a Redis
host crash: the attempt written before the call was lost, the operation looked unsent, and
no provider key absorbed the second send. So the sender reads appendonly/appendfsync at
start: a Redis that says it may lose a write stops it (one line naming the fix), unless the
operator accepts the risk; a Redis that refuses CONFIG GET (managed Redis) cannot be
verified and is a loud error line. Either way the exposure is a metric per provider.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY
from redis.asyncio import Redis

from services.ctl.embedded import RedisServer
from shared.providers.registry import keyless
from shared.redis_policy import StoreNotDurable, check_keyless_durability
from tests.conftest import TEST_TOKEN_KEYS
from tests.support.redis_acl import url_without_config

EXPOSURE = "resetgate_send_twice_exposure"


def exposure(provider: str, appendfsync: str) -> float | None:
    return REGISTRY.get_sample_value(EXPOSURE, {"provider": provider, "appendfsync": appendfsync})


def errors(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == logging.ERROR and "twice" in r.msg]


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    server = RedisServer(appendonly=True, appendfsync="everysec").start()
    yield server
    server.stop()


async def _configured(server: RedisServer, **config: str) -> Redis:
    client = Redis.from_url(server.url, decode_responses=True)
    for name, value in config.items():
        await client.config_set(name, value)
    return client


def test_every_provider_but_the_keyed_contract_is_keyless() -> None:
    assert [k for k in ("http", "sendgrid", "postmark", "mailgun", "ses") if keyless(k)] == [
        "sendgrid",
        "postmark",
        "mailgun",
        "ses",
    ]


@pytest.mark.parametrize(
    ("config", "described"),
    [
        ({"appendfsync": "everysec"}, "appendfsync everysec"),
        ({"appendonly": "no"}, "appendonly no"),
    ],
)
async def test_redis_that_may_lose_a_write_stops_a_keyless_sender(
    own_redis: RedisServer, config: dict[str, str], described: str
) -> None:
    client = await _configured(own_redis, **config)
    try:
        with pytest.raises(StoreNotDurable, match=described) as refused:
            await check_keyless_durability(client, {"postmark": "postmark"}, require=True)
    finally:
        await client.aclose()
    assert "RESETGATE_KEYLESS_REQUIRE_FSYNC_ALWAYS=false" in str(refused.value)
    assert exposure("postmark", "off" if "appendonly" in config else "everysec") == 1


async def test_appendfsync_always_is_quiet_and_exports_no_exposure(
    own_redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    client = await _configured(own_redis, appendfsync="always")
    try:
        assert (
            await check_keyless_durability(client, {"mailgun": "mailgun"}, require=True) == "always"
        )
    finally:
        await client.aclose()
    assert exposure("mailgun", "always") == 0
    assert not errors(caplog)


async def test_an_accepted_risk_starts_with_an_error_line_and_the_exposure(
    own_redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    client = await _configured(own_redis)
    try:
        assert (
            await check_keyless_durability(client, {"sendgrid": "sendgrid"}, require=False)
            == "everysec"
        )
    finally:
        await client.aclose()
    assert exposure("sendgrid", "everysec") == 1
    assert errors(caplog)


async def test_a_refused_config_get_cannot_be_verified_and_is_loud_not_fatal(
    own_redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Managed Redis often refuses CONFIG (here an ACL user without it, as they answer)."""
    client = Redis.from_url(await url_without_config(own_redis))
    try:
        assert await check_keyless_durability(client, {"ses": "ses"}, require=True) == "unknown"
    finally:
        await client.aclose()
    assert exposure("ses", "unknown") == 1
    (line,) = errors(caplog)
    assert "CONFIG GET refused" in line.msg


async def test_a_keyed_provider_alone_asks_nothing(own_redis: RedisServer) -> None:
    client = await _configured(own_redis, appendonly="no")
    try:
        assert await check_keyless_durability(client, {}, require=True) == ""
    finally:
        await client.aclose()


def test_the_sender_process_refuses_to_start_with_one_line(own_redis: RedisServer) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RESETGATE_")}
    env = {
        **clean,
        "RESETGATE_REDIS_URL": own_redis.url,
        "RESETGATE_PROVIDER_KIND": "postmark",
        "RESETGATE_PROVIDER_URL": "http://127.0.0.1:9",  # never called: it stops first
        "RESETGATE_PROVIDER_API_KEY": "durability-test-key",
        "RESETGATE_TOKEN_KEYS": TEST_TOKEN_KEYS,
        "RESETGATE_METRICS_PORT": "0",
    }
    done = subprocess.run(
        [sys.executable, "-m", "services.sender"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("invalid configuration:")]
    assert "appendfsync everysec" in line and "default (postmark)" in line
    assert "Traceback" not in done.stderr

"""The sender's periodic preflight: the same checks as `resetgate providers check`,
published as resetgate_provider_check{provider,check}, stored for `ops status` and the
console's providers page (shared.preflight.store.read), read-only calls only."""

from __future__ import annotations

from typing import Any

import aiohttp
from redis.asyncio import Redis

from services.ctl.embedded import RedisServer
from services.sender.preflight import check_once
from shared import metrics
from shared.preflight.store import read
from shared.providers.registry import open_provider
from shared.settings import EmailSettings
from tests.console.helpers import console, console_settings, get_text, sign_in
from tests.ctl.test_ops import ops, ops_json
from tests.providers.kinds import DOMAIN, config
from tests.support.sandbox import run_sandbox, sandbox_stats

EMAIL = EmailSettings(email_from="Studio Inc. <no-reply@studio.example>")


async def _check(redis: Redis, url: str, **overrides: Any) -> None:
    cfg = config("mailgun", url, **overrides)
    async with aiohttp.ClientSession() as session, open_provider(cfg, session) as provider:
        await check_once(redis, session, EMAIL, [(cfg, provider)])


def _gauge(provider: str, check: str) -> float:
    return float(metrics.provider_check.labels(provider, check)._value.get())


async def test_a_failing_check_is_published_stored_and_shown(
    redis: Redis, redis_server: RedisServer
) -> None:
    async with run_sandbox(mode="mailgun", domains="studio.example") as url:
        await _check(redis, url, name="eu")
        stats = await sandbox_stats(url)
    assert stats["emails_sent_total"] == 0  # never a send
    stored = (await read(redis))["eu"]
    assert [c.check for c in stored.failing] == ["domain"]
    assert _gauge("eu", "domain") == -1 and _gauge("eu", "key") == 1
    text = ops(redis_server, "status", RESETGATE_PROVIDER_NAME="eu").stdout
    assert "check domain FAILING" in text and "api.eu.mailgun.net" in text
    [line] = ops_json(redis_server, "status", RESETGATE_PROVIDER_NAME="eu")["providers"]
    assert {row["check"]: row["status"] for row in line["checks"]}["domain"] == "failed"
    async with console(console_settings(redis_server.url, provider_name="eu")) as http:
        page = await get_text(http, "/console/providers", await sign_in(http))
    assert "Failing provider checks" in page and DOMAIN in page


async def test_checks_that_pass_show_nothing_failing(
    redis: Redis, redis_server: RedisServer
) -> None:
    """The opposite harm: a provider configured right must not read as misconfigured."""
    async with run_sandbox(mode="mailgun") as url:
        await _check(redis, url, name="us")
    assert not (await read(redis))["us"].failing
    assert _gauge("us", "domain") == 1
    assert "FAILING" not in ops(redis_server, "status", RESETGATE_PROVIDER_NAME="us").stdout
    async with console(console_settings(redis_server.url, provider_name="us")) as http:
        page = await get_text(http, "/console/providers", await sign_in(http))
    assert "Failing provider checks" not in page

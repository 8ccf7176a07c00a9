"""What on-call reads while a provider throttles: the providers page says what the provider
is really accepting and until when a daily quota pauses it; an operation page counts its
throttles apart from its attempts and reads as waiting, not failing."""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis

from shared import clock, control
from shared.keys import PartitionKeys, provider_pacing
from tests.console.helpers import console, console_settings, get_text, sign_in


async def test_the_providers_page_says_until_when_a_quota_pauses_sending(
    redis: Redis, redis_server: Any
) -> None:
    now = clock.now_ms()
    await control.quota_pause(redis, "default", now + 3_600_000, "daily quota used up", "k")
    await redis.hset(
        provider_pacing("default"),
        mapping={"since": now - 10**7, "accepted": 10**4, "good": 0.95, "tat": now + 60_000},
    )
    async with console(console_settings(redis_server.url)) as http:
        page = await get_text(http, "/console/providers", await sign_in(http))
    assert "Accepting now: 1.00 sends/s; settled at 0.95 sends/s" in page
    assert "(daily quota)</strong>" in page and "Paused until <time" in page


async def test_an_operation_waiting_on_throttles_reads_as_waiting(
    redis: Redis, redis_server: Any
) -> None:
    from tests.console.test_console_http import _admit

    op = await _admit(redis, redis_server.url, "acct-alice")
    await redis.hset(
        PartitionKeys.of(op).operation(op),
        mapping={"state": "deferred", "throttles": 7, "reason": "throttled"},
    )
    async with console(console_settings(redis_server.url)) as http:
        page = await get_text(http, f"/console/operations/{op}", await sign_in(http))
    assert "7 (not counted as attempts; waiting for the provider, not failing)" in page
    assert "0 of 6" in page  # no attempt spent

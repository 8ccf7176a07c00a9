"""A provider that misbehaves: huge bodies, invalid JSON, wrong content types, absurd
Retry-After values, a response that drips. A real HTTP server on loopback answers each."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime

import aiohttp
import pytest
from aiohttp import web

from services.ctl.embedded import free_port
from services.sender.policy import RetryPolicy, decide
from shared.model import Outcome, State
from shared.providers.http import HttpProvider
from shared.retry_after import parse

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
HUGE = b"x" * (8 * 1024 * 1024)


async def huge_ok(_: web.Request) -> web.StreamResponse:
    return web.Response(body=b'{"id": "msg-1", "pad": "' + HUGE + b'"}', status=200)


async def invalid_json(_: web.Request) -> web.StreamResponse:
    return web.Response(body=b"<html>accepted!</html>", status=200, content_type="text/html")


async def json_as_text(_: web.Request) -> web.StreamResponse:
    return web.Response(body=b'{"id": "msg-2"}', status=202, content_type="text/plain")


async def id_not_a_string(_: web.Request) -> web.StreamResponse:
    return web.json_response({"id": {"nested": True}})


async def huge_error(_: web.Request) -> web.StreamResponse:
    return web.Response(body=HUGE, status=503)


async def absurd_retry_after(_: web.Request) -> web.StreamResponse:
    return web.Response(status=429, headers={"Retry-After": "9" * 40})


async def negative_retry_after(_: web.Request) -> web.StreamResponse:
    return web.Response(status=429, headers={"Retry-After": "-30"})


async def drip(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(status=200)
    await response.prepare(request)
    for _ in range(100):
        await response.write(b" ")
        await asyncio.sleep(0.1)
    return response


@pytest.fixture
async def hostile() -> AsyncIterator[Callable[[Handler], Awaitable[HttpProvider]]]:
    runners: list[web.AppRunner] = []
    session = aiohttp.ClientSession()

    async def serve(handler: Handler) -> HttpProvider:
        app = web.Application()
        app.router.add_post("/email/send", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        port = runner.addresses[0][1]
        return HttpProvider(session, f"http://127.0.0.1:{port}", "key", total_timeout=1.0)

    yield serve
    await session.close()
    for runner in runners:
        await runner.cleanup()


MESSAGE = {"to": ["p@example.com"], "subject": "s", "text": "t"}


@pytest.mark.parametrize(
    ("handler", "outcome", "reason"),
    [
        # An accepted send whose id we cannot read is reconciled by key, never resent blind.
        (huge_ok, Outcome.AMBIGUOUS, "accepted_without_id"),
        (invalid_json, Outcome.AMBIGUOUS, "accepted_without_id"),
        (id_not_a_string, Outcome.AMBIGUOUS, "accepted_without_id"),
        (json_as_text, Outcome.ACCEPTED, ""),
        (huge_error, Outcome.TRANSIENT, ""),
        (drip, Outcome.AMBIGUOUS, "lost:"),
    ],
)
async def test_hostile_responses_are_classified_safely(
    hostile: Callable[[Handler], Awaitable[HttpProvider]],
    handler: Handler,
    outcome: Outcome,
    reason: str,
) -> None:
    provider = await hostile(handler)
    result = await provider.send("op-0-X", MESSAGE)
    assert result.outcome is outcome
    assert result.reason.startswith(reason)


@pytest.mark.parametrize("handler", [absurd_retry_after, negative_retry_after])
async def test_absurd_retry_after_never_schedules_past_the_horizon(
    hostile: Callable[[Handler], Awaitable[HttpProvider]], handler: Handler
) -> None:
    provider = await hostile(handler)
    result = await provider.send("op-0-X", MESSAGE)
    assert result.outcome is Outcome.THROTTLED
    advice = parse(result.retry_after, datetime.now(UTC), result.server_date)
    policy = RetryPolicy(6, 1000, 60_000, 1000)
    final = decide(
        Outcome.THROTTLED,
        429,
        attempt=1,
        now=0,
        horizon_at=3_600_000,
        policy=policy,
        rng=random.Random(0),
        retry_after=advice,
    )
    if advice.delay_ms is None:  # negative: not delay-seconds, so backoff
        assert final.next_state == State.DEFERRED and final.retry_at <= 60_000
    else:  # 10^40 seconds: capped as the provider-wide block is, never exhausted for it
        assert (final.next_state, final.retry_at) == (State.DEFERRED, policy.max_advised_wait_ms)


async def test_connection_refused_is_safe_to_retry() -> None:
    async with aiohttp.ClientSession() as session:
        provider = HttpProvider(session, f"http://127.0.0.1:{free_port()}", "key")
        result = await provider.send("op-0-X", MESSAGE)
    assert result.outcome is Outcome.TRANSIENT
    assert result.reason.startswith("not_sent:")

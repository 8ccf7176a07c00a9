"""One absurd Retry-After must not silence a loop (issue 10, item 3).

Found by attack on real processes: a provider answering one 429 with ``Retry-After:
99…9`` (parsed, bounded at 400 days) stopped the poller asking for that long while it kept
its lease and said it was ready. Now every advised wait is capped at
``RESETGATE_MAX_ADVISED_WAIT_SECONDS`` (counted, logged), the poller exports the time of its
last successful events page or lookup, and a lease holder with work waiting and no success
for ``RESETGATE_POLL_STALL_SECONDS`` is not ready (PollerStalled pages on the gauge).

The provider here is a real HTTP server on loopback playing a hostile one (as in
tests/sender/test_hostile_provider.py): the sandbox only ever advises honest waits.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from prometheus_client import REGISTRY
from redis.asyncio import Redis

from services.ctl.embedded import RedisServer
from shared.ids import operation_id
from shared.keys import PartitionKeys
from shared.model import State
from tests.conftest import TEST_TOKEN_KEYS
from tests.sender.conftest import Stack, wait_for
from tests.support.processes import ServiceProcess

ABSURD = "9" * 40  # delay-seconds; resetgate bounds it at 400 days
# A long wait inside the operation's delivery horizon: before the cap every sender replica
# stopped sending for that long; the operation waits the capped time too.
LONG = "1800"


class HostileProvider:
    """429 with an absurd Retry-After for the first ``throttle`` calls of each route, then
    normal answers; counts the calls."""

    def __init__(self, throttle: int) -> None:
        self.throttle = throttle
        self.calls: dict[str, int] = {"events": 0, "send": 0}

    def _throttled(self, route: str) -> bool:
        self.calls[route] += 1
        return self.calls[route] <= self.throttle

    async def events(self, _: web.Request) -> web.Response:
        if self._throttled("events"):
            return web.Response(status=429, headers={"Retry-After": ABSURD})
        return web.json_response({"data": [], "next": "c1"})

    async def send(self, _: web.Request) -> web.Response:
        if self._throttled("send"):
            return web.Response(status=429, headers={"Retry-After": LONG})
        return web.json_response({"id": f"msg-{self.calls['send']}"})


async def _serve(provider: HostileProvider) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_get("/email/events", provider.events)
    app.router.add_post("/email/send", provider.send)
    async with TestServer(app, host="127.0.0.1") as server:
        yield str(server.make_url("")).rstrip("/")


def _poller(redis_server: RedisServer, url: str, logs: Path, **env: str) -> ServiceProcess:
    return ServiceProcess(
        "poller",
        {
            "RESETGATE_REDIS_URL": redis_server.url,
            "RESETGATE_PROVIDER_URL": url,
            "RESETGATE_PROVIDER_API_KEY": "hostile-provider-key",
            "RESETGATE_PARTITIONS": "2",
            "RESETGATE_TOKEN_KEYS": TEST_TOKEN_KEYS,
            "RESETGATE_POLL_INTERVAL_SECONDS": "0.2",
            "RESETGATE_CLOSE_INTERVAL_SECONDS": "0.2",
            "RESETGATE_MAX_ADVISED_WAIT_SECONDS": "1",
            "RESETGATE_LEASE_SECONDS": "3",
            **env,
        },
        logs,
    )


@pytest.fixture
async def provider_once() -> AsyncIterator[tuple[HostileProvider, str]]:
    provider = HostileProvider(throttle=1)
    async for url in _serve(provider):
        yield provider, url


@pytest.fixture
async def provider_always() -> AsyncIterator[tuple[HostileProvider, str]]:
    provider = HostileProvider(throttle=10**9)
    async for url in _serve(provider):
        yield provider, url


async def test_a_real_poller_asks_again_after_the_capped_wait(
    redis: Redis,
    redis_server: RedisServer,
    tmp_path: Path,
    provider_once: tuple[HostileProvider, str],
) -> None:
    provider, url = provider_once
    poller = await _poller(redis_server, url, tmp_path).start()
    try:
        await wait_for(lambda: _at_least(provider.calls["events"], 3), timeout=15)
        assert await poller.metric("resetgate_advised_wait_capped_total", loop="poller") == 1
        capped = [
            r
            for r in poller.log_records()
            if r.get("loop") == "poller" and "capped" in str(r.get("msg"))
        ]
        assert capped and capped[0]["capped_to_s"] == 1
        last = await poller.metric("resetgate_poller_last_success_timestamp_seconds")
        assert time.time() - last < 10  # pages answered after the cap: success recorded
    finally:
        await poller.stop()


async def test_an_absurd_wait_on_the_feed_holds_polling_no_longer_than_its_backoff_cap(
    redis: Redis,
    redis_server: RedisServer,
    tmp_path: Path,
    provider_once: tuple[HostileProvider, str],
) -> None:
    """With the default RESETGATE_MAX_ADVISED_WAIT_SECONDS (900 s), one absurd 429 on the
    feed held polling and every lookup behind it for 900 s; it holds them for the poller's
    own backoff cap (1 s here, RESETGATE_POLL_BACKOFF_CAP_SECONDS)."""
    provider, url = provider_once
    poller = _poller(
        redis_server,
        url,
        tmp_path,
        RESETGATE_MAX_ADVISED_WAIT_SECONDS="900",
        RESETGATE_POLL_BACKOFF_CAP_SECONDS="1",
    )
    await poller.start()
    try:
        await wait_for(lambda: _at_least(provider.calls["events"], 3), timeout=15)
        capped = [
            r
            for r in poller.log_records()
            if r.get("loop") == "poller" and "capped" in str(r.get("msg"))
        ]
        assert capped and capped[0]["capped_to_s"] == 1
    finally:
        await poller.stop()


async def _at_least(value: int, minimum: int) -> bool:
    return value >= minimum


async def test_a_stalled_poller_with_work_waiting_is_not_ready(
    redis: Redis,
    redis_server: RedisServer,
    tmp_path: Path,
    provider_always: tuple[HostileProvider, str],
) -> None:
    _, url = provider_always
    waiting = operation_id(0)  # an accepted operation whose delivery is still awaited
    await redis.zadd(PartitionKeys(0).observe, {waiting: int(time.time() * 1000) + 3_600_000})
    poller = await _poller(redis_server, url, tmp_path, RESETGATE_POLL_STALL_SECONDS="2").start()
    started = time.time()
    try:
        ready = await _until_not_ready(poller)
        assert ready["checks"] == {
            "redis": True,
            "provider_credentials": True,
            "provider_answering": False,
        }
        last = await poller.metric("resetgate_poller_last_success_timestamp_seconds")
        assert last <= started  # never a success: the gauge holds the process start
    finally:
        await poller.stop()


async def _until_not_ready(service: ServiceProcess) -> dict[str, Any]:
    import aiohttp

    async with aiohttp.ClientSession() as session, asyncio.timeout(20):
        while True:
            async with session.get(service.ops_url + "/readyz") as reply:
                if reply.status == 503:
                    body: dict[str, Any] = await reply.json()
                    return body
            await asyncio.sleep(0.2)


async def test_the_senders_pacing_block_is_capped(
    stack: Stack, provider_once: tuple[HostileProvider, str]
) -> None:
    """The sender's provider-wide block after a 429 advising 30 minutes lasts the cap (1 s
    here): the next operation is sent a second later, and the throttled one waits the same
    capped time (it was exhausted at its first attempt when its own wait passed the horizon),
    its attempt not spent."""
    provider, url = provider_once
    stack = Stack(stack.redis, stack.redis_url, url)  # the hostile provider, not the sandbox
    before = REGISTRY.get_sample_value("resetgate_advised_wait_capped_total", {"loop": "sender"})
    first = await stack.admit("acct-cap-1")
    async with stack.sender(max_advised_wait_seconds=1, concurrency=1):
        await wait_for(lambda: _at_least(provider.calls["send"], 1))
        second = await stack.admit("acct-cap-2")
        accepted = await stack.wait_state(second, {State.ACCEPTED}, timeout=15)
        assert accepted.attempts == 1
        throttled = await stack.wait_state(first, {State.ACCEPTED}, timeout=15)
        assert (throttled.attempts, throttled.throttles) == (1, 1)
    after = REGISTRY.get_sample_value("resetgate_advised_wait_capped_total", {"loop": "sender"})
    assert (after or 0) - (before or 0) == 1

"""Issue 10 items 2 and 6, on real HTTP servers: no provider call follows a redirect, and a
2xx the provider does not document for a send is ambiguous (reconciled), never retried
blind nor taken as acceptance. The http contract's documented send successes are 200 and
202 (docs/provider-contract.md)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import aiohttp
import pytest
from aiohttp import web

from shared import metrics
from shared.model import Outcome, State
from shared.providers.base import ProviderUnavailable
from shared.providers.http import HttpProvider
from tests.sender.conftest import Stack

MESSAGE = {"from": "a@game.example", "to": ["p@example.com"], "subject": "s", "text": "t"}


@dataclass
class Servers:
    """A provider answering ``status`` on every route, and the host its Location names."""

    provider_url: str = ""
    elsewhere_hits: list[str] = field(default_factory=list)
    status: int = 307
    runners: list[web.AppRunner] = field(default_factory=list)

    async def start(self, app: web.Application) -> str:
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self.runners.append(runner)
        return f"http://127.0.0.1:{runner.addresses[0][1]}"


@pytest.fixture
async def servers() -> AsyncIterator[Servers]:
    state = Servers()

    async def elsewhere(request: web.Request) -> web.Response:
        state.elsewhere_hits.append(f"{request.method} {request.path}")
        return web.json_response({"id": "msg-elsewhere", "data": [], "next": "0"})

    other = web.Application()
    other.router.add_route("*", "/{tail:.*}", elsewhere)
    target = await state.start(other)

    async def answer(request: web.Request) -> web.Response:
        if 300 <= state.status < 400:
            return web.Response(status=state.status, headers={"Location": target + request.path})
        if state.status == 204:
            return web.Response(status=204)
        return web.json_response({"id": "msg-1"}, status=state.status)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    state.provider_url = await state.start(app)
    yield state
    for runner in state.runners:
        await runner.cleanup()


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_a_redirected_send_is_never_followed_nor_accepted(
    servers: Servers, status: int
) -> None:
    servers.status = status
    counted = metrics.provider_redirects.labels("http", "POST")
    before = counted._value.get()
    async with aiohttp.ClientSession() as session:
        result = await HttpProvider(session, servers.provider_url, "key").send("op-0-X", MESSAGE)
    assert (result.outcome, result.status) == (Outcome.TRANSIENT, status)
    assert result.reason == "redirect_not_followed"
    assert servers.elsewhere_hits == []  # the reset link never left for the Location host
    assert counted._value.get() == before + 1


@pytest.mark.parametrize("status", [302, 307])
async def test_lookups_and_feed_never_follow_a_redirect(servers: Servers, status: int) -> None:
    servers.status = status
    async with aiohttp.ClientSession() as session:
        provider = HttpProvider(session, servers.provider_url, "key")
        lookup = await provider.lookup("op-0-X")
        feed = await provider.events("", 10)
        detail = await provider.message("msg-1")
    assert (lookup.status, lookup.message_id) == (status, "")
    assert (feed.status, detail.status) == (status, status)
    assert servers.elsewhere_hits == []


@pytest.mark.parametrize("status", [201, 204, 203, 206])
async def test_an_undocumented_2xx_is_ambiguous(servers: Servers, status: int) -> None:
    servers.status = status
    async with aiohttp.ClientSession() as session:
        result = await HttpProvider(session, servers.provider_url, "key").send("op-0-X", MESSAGE)
    assert (result.outcome, result.reason) == (Outcome.AMBIGUOUS, f"undocumented_{status}")


async def test_a_provider_that_redirects_never_accepts_an_operation(
    servers: Servers, stack: Stack
) -> None:
    """The sender, end to end: 302 on every send -> retried (deferred), never accepted,
    and nothing reaches the Location host; once it answers 204 the attempt is ambiguous."""
    servers.status = 302
    stack.provider_url = servers.provider_url
    operation_id = await stack.admit("acct-redirect")
    async with stack.sender():
        operation = await stack.wait_state(operation_id, {State.DEFERRED, State.EXHAUSTED})
        assert operation.last_status == 302
        servers.status = 204
        operation = await stack.wait_state(operation_id, {State.AMBIGUOUS})
    assert operation.last_status == 204
    assert servers.elsewhere_hits == []


async def test_a_lookup_redirect_is_unavailable_not_not_found(servers: Servers) -> None:
    from services.poller.ambiguity import lookup

    servers.status = 307
    async with aiohttp.ClientSession() as session:
        with pytest.raises(ProviderUnavailable):
            await lookup(HttpProvider(session, servers.provider_url, "key"), "op-0-X")


async def test_the_directory_never_follows_a_redirect(servers: Servers) -> None:
    from shared.directory import DirectoryError, HttpDirectory

    servers.status = 302
    async with aiohttp.ClientSession() as session:
        with pytest.raises(DirectoryError):
            await HttpDirectory(session, servers.provider_url, 2.0).get_account("acct-1")
    assert servers.elsewhere_hits == []

"""Account ids never choose the directory's route (issue 10, item 4), on real processes.

Found by attack: a contact form with ``account_id="../../admin/users?delete=all#"`` made the
router call ``GET /admin/users?delete=all`` on the studio's directory, and then created an
operation for whatever account that answer named. Here a real router and a real admission
talk to a directory served by a real HTTP server that records every request line it gets.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from redis.asyncio import Redis

from shared.directory import DirectoryError, HttpDirectory
from shared.keys import CONTACT_FORMS, CONTACT_FORMS_DEAD, SUPPORT_CASES
from tests.security.conftest import BEARER
from tests.support.keys import ANY_PARTITION
from tests.support.processes import Processes

HOSTILE = "../../admin/users?delete=all#"
VICTIM = {"account_id": "acct-victim", "email": "victim@example.com", "locale": "en"}


class Studio:
    """A directory that answers every path with the victim's account, and remembers paths."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.paths.append(request.raw_path)
        if request.raw_path.startswith("/accounts/acct%3Acolon"):
            return web.json_response({**VICTIM, "account_id": "acct:colon"})
        return web.json_response(VICTIM)


@pytest.fixture
async def studio() -> AsyncIterator[tuple[Studio, str]]:
    directory = Studio()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", directory.handle)
    async with TestServer(app, host="127.0.0.1") as server:
        yield directory, str(server.make_url("")).rstrip("/")


async def _form(redis: Redis, event_id: str, account_id: str) -> None:
    await redis.xadd(
        CONTACT_FORMS,
        {
            "event_id": event_id,
            "topic": "account_access",
            "account_id": account_id,
            "message": "help",
        },
    )


async def _settled(redis: Redis, count: int) -> list[dict[str, Any]]:
    async with asyncio.timeout(15):
        while True:
            done = [f for _, f in await redis.xrange(CONTACT_FORMS_DEAD)]
            done += [f for _, f in await redis.xrange(SUPPORT_CASES)]
            if len(done) >= count:
                return done
            await asyncio.sleep(0.1)


async def test_a_hostile_account_id_never_reaches_the_directory_as_a_path(
    stack: Processes, redis: Redis, studio: tuple[Studio, str]
) -> None:
    directory, url = studio
    await stack.start("router", RESETGATE_DIRECTORY_URL=url, RESETGATE_BLOCK_MS="100")
    for event_id, account_id in (
        ("e-hostile", HOSTILE),
        ("e-dots", ".."),
        ("e-dot", "."),
        ("e-colon", "acct:colon"),
    ):
        await _form(redis, event_id, account_id)
    await _settled(redis, 4)
    assert directory.paths == ["/accounts/acct%3Acolon"]  # quoted; the others never sent
    dead = {f["event_id"]: f["reason"] for _, f in await redis.xrange(CONTACT_FORMS_DEAD)}
    assert dead == {
        "e-hostile": "bad_account_id",
        "e-dots": "bad_account_id",
        "e-dot": "bad_account_id",
    }
    assert not await redis.keys(ANY_PARTITION.account("acct-victim"))  # no operation for the victim


async def test_the_internal_api_refuses_an_account_id_of_another_shape(
    stack: Processes, studio: tuple[Studio, str]
) -> None:
    directory, url = studio
    admission = await stack.start("admission", RESETGATE_DIRECTORY_URL=url)
    async with aiohttp.ClientSession() as session:
        for account_id in (HOSTILE, "..", ".", "-x", "a/b", "a%2Fb", "acct-1\n"):
            body = {"account_id": account_id, "entry_point": "agent", "actor": "agent:ann"}
            async with session.post(
                admission.url + "/internal/v1/recovery-operations", json=body, headers=BEARER
            ) as reply:
                assert reply.status == 422, account_id
                assert (await reply.json())["error"] == "invalid_field"
    assert directory.paths == []


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_the_directory_client_follows_no_redirect(
    studio: tuple[Studio, str], status: int
) -> None:
    """A 3xx from the directory is an error (503 directory_unavailable at the edge), and the
    host it names never hears from us."""
    elsewhere, target = studio
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", _redirect(status, target))
    async with TestServer(app, host="127.0.0.1") as server, aiohttp.ClientSession() as session:
        directory = HttpDirectory(session, str(server.make_url("")), timeout=2)
        with pytest.raises(DirectoryError, match=str(status)):
            await directory.get_account("acct-1")
        with pytest.raises(DirectoryError, match=str(status)):
            await directory.lookup_login("player@example.com")
    assert elsewhere.paths == []


def _redirect(status: int, target: str) -> Any:
    async def handler(_: web.Request) -> web.Response:
        return web.Response(status=status, headers={"Location": target + "/accounts/acct-1"})

    return handler

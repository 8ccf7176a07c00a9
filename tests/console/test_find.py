"""The find box on every page: an operation id, an account id, or a login resolved by the
account directory admission asks; a login that cannot be resolved says why (unknown to the
directory, the local stand-in when none is configured, the directory not answering), and
nothing typed is ever echoed or logged."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from redis.asyncio import Redis

from services.ctl.embedded import free_port
from shared.directory import HttpDirectory
from tests.admission.helpers import ALICE, BOB, seed_directory
from tests.console.helpers import console, console_settings, csrf_from, get_text, sign_in
from tests.console.test_console_http import _admit

STUDIO_LOGIN = "dir.player"  # the one login the studio's directory below knows


async def _find(http: TestClient[Any, Any], headers: dict[str, str], q: str, by: str) -> Any:
    csrf = await csrf_from(http, "/console/audit", headers)  # any page: the box is on each
    return await http.post(
        "/console/find",
        data={"q": q, "by": by, "csrf": csrf},
        headers=headers,
        allow_redirects=False,
    )


async def test_a_login_finds_its_account_and_lists_its_operations(
    redis: Redis, redis_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    await seed_directory(redis)
    operation = await _admit(redis, redis_server.url, BOB[1].account_id)
    async with console(console_settings(redis_server.url)) as http:
        headers = await sign_in(http)
        assert 'name="by"' in await get_text(http, "/console/oldest", headers)
        found = await _find(http, headers, BOB[0], "login")
        assert found.status == 303
        assert found.headers["Location"] == "/console/accounts/acct-bob?result=by-login"
        account = await get_text(http, found.headers["Location"], headers)
        # By id, the same box: an operation id and an account id go straight to their pages.
        by_op = await _find(http, headers, operation, "id")
        by_account = await _find(http, headers, "acct-bob", "id")
    assert "Found by login: the account directory names this account." in account
    assert operation in account and BOB[0] not in account and BOB[1].email not in account
    assert by_op.headers["Location"] == f"/console/operations/{operation}"
    assert by_account.headers["Location"] == "/console/accounts/acct-bob"
    assert BOB[0] not in caplog.text  # logged as found, the login itself never


async def test_an_unknown_login_says_the_stand_in_has_none_and_echoes_nothing(
    redis: Redis, redis_server: Any
) -> None:
    await seed_directory(redis)
    async with console(console_settings(redis_server.url)) as http:
        headers = await sign_in(http)
        unknown = await _find(http, headers, "nobody@mail.example", "login")
        text = await unknown.text()
        # An account id typed as a login is a login: no account is guessed from it.
        as_login = await _find(http, headers, ALICE[1].account_id, "login")
    assert unknown.status == 404 and "nobody@mail.example" not in text
    assert "No account directory is configured (RESETGATE_DIRECTORY_URL is unset)" in text
    assert as_login.status == 404


@pytest.fixture
async def studio() -> AsyncIterator[str]:
    """The studio's account service as a real HTTP server that knows one login."""

    async def lookup(request: web.Request) -> web.Response:
        if request.query.get("login") != STUDIO_LOGIN:
            return web.json_response({"error": "not found"}, status=404)
        return web.json_response({"account_id": "acct-dir", "email": "d@mail.example"})

    app = web.Application()
    app.router.add_get("/accounts/lookup", lookup)
    async with TestServer(app, host="127.0.0.1") as server:
        yield str(server.make_url(""))


async def _through(redis_server: Any, url: str, *logins: str) -> list[tuple[int, str, str]]:
    """Each login found through the studio's directory at ``url`` (over HTTP): the status,
    where it leads and the page. Its callers take the ``redis`` fixture for the store it
    flushes: the sign-in limit (5 a client address) is counted in Redis, and the worker's
    earlier tests' sign-ins from 127.0.0.1 had used it up once on four workers."""
    settings = console_settings(redis_server.url, directory_url=url)
    async with (
        aiohttp.ClientSession() as session,
        console(settings, HttpDirectory(session, url, timeout=1.0)) as http,
    ):
        headers = await sign_in(http)
        replies = [await _find(http, headers, login, "login") for login in logins]
        return [(r.status, r.headers.get("Location", ""), await r.text()) for r in replies]


async def test_the_studios_directory_resolves_a_login_or_says_it_has_none(
    redis: Redis, redis_server: Any, studio: str
) -> None:
    known, unknown = await _through(redis_server, studio, STUDIO_LOGIN, "else.player")
    assert known[1] == "/console/accounts/acct-dir?result=by-login"
    status, _, text = unknown
    assert status == 404 and "The account directory has no account with this login." in text
    assert "else.player" not in text


async def test_a_directory_that_does_not_answer_is_said_so(redis: Redis, redis_server: Any) -> None:
    closed = f"http://127.0.0.1:{free_port()}"  # a directory URL nobody listens on
    [(status, _, text)] = await _through(redis_server, closed, STUDIO_LOGIN)
    assert status == 503 and "The account directory did not answer" in text
    assert STUDIO_LOGIN not in text

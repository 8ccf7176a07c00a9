"""Console test helpers: the console app over real TCP, signing in, CSRF, and the scan for
what must never be rendered (a login, an address, a token)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
from aiohttp.test_utils import TestClient, TestServer

from services.admission.console.app import create_console_app
from services.admission.console.auth import COOKIE
from services.admission.settings import AdmissionSettings
from shared.directory import Directory
from shared.redis import create_client, ping
from shared.tokens import TokenKeys
from tests.admission.helpers import INTERNAL_TOKEN, admission_settings

CSRF = re.compile(r'name="csrf" value="([0-9a-f]{64})"')
# Any address at all: the console shows none, not even an operator's.
EMAIL = re.compile(r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}")


def console_settings(redis_url: str, **overrides: Any) -> AdmissionSettings:
    values: dict[str, Any] = {"console_port": 0, "console_cookie_secure": False}
    values.update(overrides)
    return admission_settings(redis_url, **values)


@asynccontextmanager
async def console(
    settings: AdmissionSettings, directory: Directory | None = None
) -> AsyncIterator[TestClient[Any, Any]]:
    """``directory``: the account directory (None: the Redis stand-in, as admission's)."""
    store = create_client(settings)
    await ping(store)
    try:
        app = create_console_app(settings, store, directory=directory)
        server = TestServer(app, host="127.0.0.1")
        # No cookie jar: each test sends the session cookie it means to send.
        async with TestClient(server, cookie_jar=aiohttp.DummyCookieJar()) as http:
            yield http
    finally:
        await store.aclose()


async def sign_in(http: TestClient[Any, Any], name: str = "ann") -> dict[str, str]:
    """Signs in on the form; returns the Cookie header to send from now on."""
    form = {"name": name, "token": INTERNAL_TOKEN}
    response = await http.post("/console/sign-in", data=form, allow_redirects=False)
    assert response.status == 303, await response.text()
    return {"Cookie": f"{COOKIE}={response.cookies[COOKIE].value}"}


async def csrf_from(http: TestClient[Any, Any], path: str, headers: dict[str, str]) -> str:
    response = await http.get(path, headers=headers, allow_redirects=False)
    match = CSRF.search(await response.text())
    assert match, f"no CSRF token on {path}"
    return match.group(1)


def forbidden_texts(
    logins: Iterable[str], addresses: Iterable[str], keys: TokenKeys, operation_ids: Iterable[str]
) -> list[str]:
    """Every login, address, the internal token and each operation's reset token."""
    texts = [*logins, *addresses, INTERNAL_TOKEN]
    texts += [keys.derive(op) for op in operation_ids]
    return [t for t in texts if t]


def scan(page: str, forbidden: Iterable[str]) -> list[str]:
    """What of ``forbidden`` (or any address) a rendered page contains."""
    found = [text for text in forbidden if text in page]
    return found + EMAIL.findall(page)


async def get_text(http: TestClient[Any, Any], path: str, headers: dict[str, str]) -> str:
    response: aiohttp.ClientResponse = await http.get(path, headers=headers)
    return await response.text()


_INPUT_ID = re.compile(r'<input\b(?![^>]*type="(?:hidden|checkbox)")[^>]*\bid="([^"]+)"')
_INPUT = re.compile(r'<input\b(?![^>]*type="(?:hidden|checkbox)")[^>]*>')


def unlabelled(page: str) -> list[str]:
    """Visible inputs without a <label for=…> (a checkbox is labelled by wrapping it)."""
    ids = _INPUT_ID.findall(page)
    missing = [i for i in ids if f'<label for="{i}"' not in page]
    without_id = len(_INPUT.findall(page)) - len(ids)
    return missing + ["<input> without an id"] * without_id

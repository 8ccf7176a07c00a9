"""The console over HTTP: refusal without credentials, sessions, CSRF, roles, the trusted
proxy, find, and a scan of every page for a login, an address or a token."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio import Redis

from services.admission.console.app import create_console_app
from services.admission.console.pages import SECURITY_HEADERS
from shared.keys import AUDIT, CONSOLE_SESSION_PREFIX, CONTROL, PartitionKeys
from tests.admission.helpers import ALICE, BOB, INTERNAL_TOKEN, seed_directory
from tests.console.helpers import (
    console,
    console_settings,
    csrf_from,
    forbidden_texts,
    get_text,
    scan,
    sign_in,
    unlabelled,
)

LOOPBACK = {"console_trusted_proxies": "127.0.0.1/32"}  # the test's client plays the proxy
PROXY = {
    "console_proxy_user_header": "X-Forwarded-User",
    "console_act_groups": "oncall",
    **LOOPBACK,
}


async def _admit(redis: Redis, redis_url: str, account_id: str) -> str:
    from services.admission.gate import Gate
    from shared.tokens import parse_keys
    from tests.conftest import TEST_TOKEN_KEYS, make_settings

    gate = Gate(redis, make_settings(redis_url), parse_keys(TEST_TOKEN_KEYS))
    admission = await gate.admit(account_id, "agent", "test")
    return admission.operation_id


def _concrete_paths(operation_id: str) -> list[tuple[str, str]]:
    """Every console route with its placeholders filled in."""
    app = create_console_app(console_settings("redis://127.0.0.1:1/0"), None)  # type: ignore[arg-type]
    fill = {
        "{operation_id}": operation_id,
        "{account_id}": "acct-alice",
        "{partition}": "0",
        "{name}": "console.css",
    }
    paths = []
    for route in app.router.routes():
        info = route.resource.canonical if route.resource else ""
        for placeholder, value in fill.items():
            info = info.replace(placeholder, value)
        if route.method != "HEAD":
            paths.append((route.method, info))
    return paths


async def test_every_route_refuses_without_credentials(redis: Redis, redis_server: Any) -> None:
    operation_id = await _admit(redis, redis_server.url, "acct-alice")
    open_paths = {"/console/sign-in", "/console/static/console.css", "/console/static/console.js"}
    checked = 0
    async with console(console_settings(redis_server.url)) as http:
        for method, path in _concrete_paths(operation_id):
            if path in open_paths or path in ("/", "/console"):
                continue
            response = await http.request(method, path, allow_redirects=False)
            body = await response.text()
            expected = {"GET": 303, "POST": 401}[method]
            assert response.status == expected, (method, path, response.status)
            if method == "GET":
                assert response.headers["Location"] == "/console/sign-in"
            assert operation_id not in body and "acct-alice" not in body, (method, path)
            for name, value in SECURITY_HEADERS.items():
                assert response.headers.get(name) == value, (path, name)
            checked += 1
    assert checked >= 12


async def test_sign_in_gives_a_strict_short_session_and_sign_out_ends_it(
    redis: Redis, redis_server: Any
) -> None:
    async with console(console_settings(redis_server.url)) as http:
        wrong = await http.post(
            "/console/sign-in", data={"name": "ann", "token": "nope"}, allow_redirects=False
        )
        assert wrong.status == 401 and "Set-Cookie" not in wrong.headers
        response = await http.post(
            "/console/sign-in", data={"name": "ann", "token": INTERNAL_TOKEN}, allow_redirects=False
        )
        cookie = response.headers["Set-Cookie"]
        for attribute in ("HttpOnly", "SameSite=Strict", "Path=/console/", "Max-Age=900"):
            assert attribute in cookie
        headers = await sign_in(http)
        session_id = headers["Cookie"].split("=", 1)[1]
        keys = [k async for k in redis.scan_iter(CONSOLE_SESSION_PREFIX + "*")]
        assert keys and not any(session_id in k for k in keys)  # stored only as a digest
        home = await http.get("/console/", headers=headers, allow_redirects=False)
        assert home.status == 200
        csrf = await csrf_from(http, "/console/", headers)
        out = await http.post(
            "/console/sign-out", data={"csrf": csrf}, headers=headers, allow_redirects=False
        )
        assert out.status == 303
        again = await http.get("/console/", headers=headers, allow_redirects=False)
        assert again.status == 303 and again.headers["Location"] == "/console/sign-in"


async def test_sign_in_attempts_are_limited_per_address_whatever_the_token(
    redis: Redis, redis_server: Any
) -> None:
    limit = {"console_sign_in_burst": 3, "console_sign_in_per_minute": 1}
    wrong = {"name": "ann", "token": "nope"}
    right = {"name": "ann", "token": INTERNAL_TOKEN}

    async def attempt(http: Any, form: dict[str, str], forwarded_for: str = "") -> Any:
        headers = {"X-Forwarded-For": forwarded_for} if forwarded_for else {}
        return await http.post(
            "/console/sign-in", data=form, headers=headers, allow_redirects=False
        )

    async with console(console_settings(redis_server.url, **limit, **LOOPBACK)) as http:
        for _ in range(5):  # a sign-in that works forgets the attempts before it
            await sign_in(http)
        for _ in range(3):
            assert (await attempt(http, wrong)).status == 401
        limited = [await attempt(http, form) for form in (wrong, right)]
        pages = [await response.text() for response in limited]
        for response, text in zip(limited, pages, strict=True):
            assert response.status == 429 and "Set-Cookie" not in response.headers
            assert 1 <= int(response.headers["Retry-After"]) <= 60
            assert "Wait" in text and "not valid" not in text
        # Another client behind the trusted proxy has its own allowance.
        assert (await attempt(http, right, forwarded_for="203.0.113.9")).status == 303
    untrusted = console_settings(redis_server.url, console_trusted_proxies="192.0.2.0/24", **limit)
    async with console(untrusted) as http:
        # From a peer the console does not trust, X-Forwarded-For picks no fresh allowance.
        assert (await attempt(http, right, forwarded_for="203.0.113.10")).status == 429


async def test_actions_need_csrf_from_our_own_pages(redis: Redis, redis_server: Any) -> None:
    operation_id = await _admit(redis, redis_server.url, "acct-alice")
    path = f"/console/operations/{operation_id}/quarantine"
    async with console(console_settings(redis_server.url)) as http:
        headers = await sign_in(http, "ann")
        no_token = await http.post(path, data={"reason": "x"}, headers=headers)
        csrf = await csrf_from(http, path, headers)
        cross = await http.post(
            path,
            data={"reason": "x", "csrf": csrf},
            headers={**headers, "Sec-Fetch-Site": "cross-site"},
        )
        assert no_token.status == 403 and cross.status == 403
        state = await redis.hget(PartitionKeys.of(operation_id).operation(operation_id), "state")
        assert state == "queued"
        done = await http.post(
            path,
            data={"reason": "mail@example.com asked", "csrf": csrf},
            headers=headers,
            allow_redirects=False,
        )
        assert done.status == 303
        page = await get_text(http, f"/console/operations/{operation_id}", headers)
        assert "quarantined" in page and "console:ann" in page
        assert scan(page, []) == []  # the address typed into the reason was scrubbed
    entries = await redis.xrange(AUDIT)
    assert entries[-1][1]["actor"] == "console:ann"
    assert entries[-1][1]["action"] == "quarantine" and entries[-1][1]["result"] == "done"


async def test_proxy_identity_roles_and_untrusted_peers(redis: Redis, redis_server: Any) -> None:
    operation_id = await _admit(redis, redis_server.url, "acct-alice")
    path = f"/console/operations/{operation_id}/quarantine"
    async with console(console_settings(redis_server.url, **PROXY)) as http:
        reader = {"X-Forwarded-User": "rita@studio.example", "X-Forwarded-Groups": "support"}
        page = await http.get(f"/console/operations/{operation_id}", headers=reader)
        assert page.status == 200 and "console:rita" in await page.text()
        assert "studio.example" not in await page.text()
        confirm = await http.get(path, headers=reader)
        assert confirm.status == 403
        csrf = await csrf_from(http, "/console/", reader)
        refused = await http.post(path, data={"reason": "x", "csrf": csrf}, headers=reader)
        assert refused.status == 403
        actor = {"X-Forwarded-User": "otto", "X-Forwarded-Groups": "support,oncall"}
        csrf = await csrf_from(http, path, actor)
        done = await http.post(
            path, data={"reason": "hold", "csrf": csrf}, headers=actor, allow_redirects=False
        )
        assert done.status == 303
    untrusted = console_settings(
        redis_server.url, **{**PROXY, "console_trusted_proxies": "10.0.0.0/8"}
    )
    async with console(untrusted) as http:
        spoofed = await http.get("/console/", headers=actor, allow_redirects=False)
        assert spoofed.status == 303  # the header alone proves nothing


async def test_find_never_echoes_and_accounts_look_the_same(
    redis: Redis, redis_server: Any
) -> None:
    await seed_directory(redis)
    operation_id = await _admit(redis, redis_server.url, "acct-alice")
    async with console(console_settings(redis_server.url)) as http:
        headers = await sign_in(http)
        csrf = await csrf_from(http, "/console/", headers)

        async def find(q: str) -> Any:
            return await http.post(
                "/console/find", data={"q": q, "csrf": csrf}, headers=headers, allow_redirects=False
            )

        assert (await find(operation_id)).headers[
            "Location"
        ] == f"/console/operations/{operation_id}"
        assert (await find("acct-bob")).headers["Location"] == "/console/accounts/acct-bob"
        by_address = await find(ALICE[0])
        assert by_address.status == 422 and ALICE[0] not in await by_address.text()
        known = await get_text(http, "/console/accounts/acct-bob", headers)  # exists, no operation
        unknown = await get_text(http, "/console/accounts/acct-nobody", headers)
        assert known.replace("acct-bob", "X") == unknown.replace("acct-nobody", "X")


@pytest.mark.parametrize("role", ["act", "read"])
async def test_no_page_renders_a_login_an_address_or_a_token(
    redis: Redis, redis_server: Any, token_keys: Any, role: str
) -> None:
    await seed_directory(redis)
    operations = [await _admit(redis, redis_server.url, a.account_id) for _, a in (ALICE, BOB)]
    forbidden = forbidden_texts(
        [ALICE[0], BOB[0]], [ALICE[1].email, BOB[1].email], token_keys, operations
    )
    settings = console_settings(redis_server.url, console_token_role=role)
    async with console(settings) as http:
        headers = await sign_in(http)
        paths = [
            "/console/",
            "/console/oldest",
            "/console/oldest/live",
            "/console/providers",
            "/console/sign-in",
            "/console/accounts/acct-alice",
            "/console/partitions/1/pause",
        ]
        for op in operations:
            paths += [f"/console/operations/{op}", f"/console/operations/{op}/quarantine"]
        for path in paths:
            page = await get_text(http, path, headers)
            assert scan(page, forbidden) == [], path
            assert unlabelled(page) == [], path


async def test_an_expired_session_is_refused(redis: Redis, redis_server: Any) -> None:
    async with console(console_settings(redis_server.url)) as http:
        headers = await sign_in(http)
        (key,) = [k async for k in redis.scan_iter(CONSOLE_SESSION_PREFIX + "*")]
        await redis.hset(key, "expires_at", 1)  # as if its time ran out before its TTL did
        response = await http.get("/console/oldest", headers=headers, allow_redirects=False)
        assert response.status == 303 and response.headers["Location"] == "/console/sign-in"


async def test_the_operation_page_shows_its_owner_after_a_switch(
    redis: Redis, redis_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ambiguous at the provider its partition switched away from: it stays owned there.
    monkeypatch.setenv("RESETGATE_PROVIDERS", "primary,standby")
    operation_id = await _admit(redis, redis_server.url, "acct-alice")
    key = PartitionKeys.of(operation_id).operation(operation_id)
    partition = PartitionKeys.of(operation_id).partition
    await redis.hset(key, mapping={"state": "ambiguous", "provider": "primary"})
    await redis.hset(CONTROL, f"provider:{partition}", "standby")
    async with console(console_settings(redis_server.url)) as http:
        headers = await sign_in(http, "ann")
        page = await get_text(http, f"/console/operations/{operation_id}", headers)
        assert "primary (holds its unresolved ambiguous attempt" in page
        assert "not at standby" in page
        await redis.hset(key, mapping={"state": "queued"})
        page = await get_text(http, f"/console/operations/{operation_id}", headers)
        assert "standby (the partition" in page and "from its next attempt)" in page

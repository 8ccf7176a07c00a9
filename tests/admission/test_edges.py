"""The edge: bearer checks, bad input, errors as JSON, operational routes."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer
from redis.asyncio import Redis

from services.admission.app import readiness
from services.admission.context import REDIS
from services.ctl.embedded import free_port
from shared.directory import Account, DirectoryError, HttpDirectory
from shared.keys import PREFIX
from shared.service import operational_app
from tests.admission.helpers import (
    ALICE,
    BEARER,
    INTERNAL_TOKEN,
    admission_settings,
    seed_directory,
    serving,
)
from tests.support.keys import ANY_PARTITION

INTERNAL_ROUTES = [
    ("POST", "/internal/v1/recovery-operations"),
    ("GET", "/internal/v1/recovery-operations?oldest=3"),
    ("GET", "/internal/v1/recovery-operations/op-1-01M8KVZDNBE35GX41B1GG54MAF"),
    ("GET", "/internal/v1/accounts/acct-alice/recovery-operation"),
    ("POST", "/internal/v1/reset-tokens/consume"),
    ("GET", "/internal/v1/no-such-route"),
]
WRONG_CREDENTIALS = [
    None,
    "Bearer ",
    "Bearer wrong-token-0123456789",
    f"Basic {INTERNAL_TOKEN}",
    f"Bearer {INTERNAL_TOKEN}x",
    f"Bearer {INTERNAL_TOKEN[:-1]}",
]


@pytest.mark.parametrize("authorization", WRONG_CREDENTIALS)
async def test_internal_routes_need_the_bearer(
    api: TestClient[Any, Any], redis: Redis, authorization: str | None
) -> None:
    size = await redis.dbsize()
    headers = {"Authorization": authorization} if authorization is not None else {}
    for method, path in INTERNAL_ROUTES:
        body = {"account_id": "acct-alice", "entry_point": "agent"}
        reply = await api.request(method, path, json=body, headers=headers)
        assert reply.status == 401, path
        assert reply.headers["WWW-Authenticate"].startswith("Bearer")
        assert (await reply.json())["error"] == "unauthorized"
    assert await redis.dbsize() == size


BIG = 16 * 1024
LOGIN_ROUTE = "/v1/password-resets"
ADMIT_ROUTE = "/internal/v1/recovery-operations"
CONSUME_ROUTE = "/internal/v1/reset-tokens/consume"
JSON = "application/json"


def padded(size: int) -> bytes:
    """A well-formed login body of exactly ``size`` bytes."""
    head, tail = b'{"login":"', b'"}'
    return head + b"a" * (size - len(head) - len(tail)) + tail


BAD_INPUT = [
    ("malformed json", LOGIN_ROUTE, b'{"login": ', JSON, 400, "malformed_json"),
    ("not utf-8", LOGIN_ROUTE, b'{"login": "\xff"}', JSON, 400, "malformed_json"),
    ("empty body", LOGIN_ROUTE, b"", JSON, 400, "malformed_json"),
    ("array", LOGIN_ROUTE, b'["alice"]', JSON, 422, "invalid_body"),
    ("null", LOGIN_ROUTE, b"null", JSON, 422, "invalid_body"),
    ("wrong type", LOGIN_ROUTE, b'{"login": 42}', JSON, 422, "invalid_field"),
    ("null login", LOGIN_ROUTE, b'{"login": null}', JSON, 422, "invalid_field"),
    ("empty login", LOGIN_ROUTE, b'{"login": ""}', JSON, 422, "invalid_field"),
    ("long login", LOGIN_ROUTE, b'{"login": "' + b"a" * 255 + b'"}', JSON, 422, "invalid_field"),
    ("missing field", LOGIN_ROUTE, b"{}", JSON, 422, "missing_field"),
    ("unknown field", LOGIN_ROUTE, b'{"login": "a", "x": 1}', JSON, 422, "unknown_field"),
    ("16 KiB + 1", LOGIN_ROUTE, padded(BIG + 1), JSON, 413, "body_too_large"),
    ("text/plain", LOGIN_ROUTE, b'{"login": "a"}', "text/plain", 415, "unsupported_media_type"),
    (
        "form",
        LOGIN_ROUTE,
        b"login=a",
        "application/x-www-form-urlencoded",
        415,
        "unsupported_media_type",
    ),
    (
        "unknown entry point",
        ADMIT_ROUTE,
        b'{"account_id": "acct-alice", "entry_point": "sms"}',
        JSON,
        422,
        "invalid_field",
    ),
    (
        "bad account id",
        ADMIT_ROUTE,
        b'{"account_id": "a b", "entry_point": "agent"}',
        JSON,
        422,
        "invalid_field",
    ),
    (
        "actor too long",
        ADMIT_ROUTE,
        b'{"account_id": "acct-alice", "entry_point": "agent", "actor": "' + b"x" * 129 + b'"}',
        JSON,
        422,
        "invalid_field",
    ),
    (
        "actor not a string",
        ADMIT_ROUTE,
        b'{"account_id": "acct-alice", "entry_point": "agent", "actor": ["x"]}',
        JSON,
        422,
        "invalid_field",
    ),
    (
        "missing entry point",
        ADMIT_ROUTE,
        b'{"account_id": "acct-alice"}',
        JSON,
        422,
        "missing_field",
    ),
    ("admit 16 KiB + 1", ADMIT_ROUTE, b" " * (BIG + 1), JSON, 413, "body_too_large"),
    (
        "consume no token",
        CONSUME_ROUTE,
        b'{"operation_id": "op-1-01M8KVZDNBE35GX41B1GG54MAF"}',
        JSON,
        422,
        "missing_field",
    ),
    (
        "consume bad id",
        CONSUME_ROUTE,
        b'{"operation_id": "op-1", "token": "abc"}',
        JSON,
        422,
        "invalid_field",
    ),
    (
        "consume token with newline",
        CONSUME_ROUTE,
        b'{"operation_id": "op-1-01M8KVZDNBE35GX41B1GG54MAF", "token": "abc\\n"}',
        JSON,
        422,
        "invalid_field",
    ),
]


@pytest.mark.parametrize(
    ("route", "body", "content_type", "status", "error"),
    [case[1:] for case in BAD_INPUT],
    ids=[case[0] for case in BAD_INPUT],
)
async def test_bad_input_is_refused_with_json_and_writes_nothing(
    api: TestClient[Any, Any],
    redis: Redis,
    route: str,
    body: bytes,
    content_type: str,
    status: int,
    error: str,
) -> None:
    size = await redis.dbsize()
    headers = {"Content-Type": content_type, **BEARER}
    reply = await api.post(route, data=body, headers=headers)
    assert reply.status == status
    assert reply.headers["Content-Type"] == JSON
    payload = await reply.json()
    assert payload["error"] == error and payload["message"]
    assert await redis.dbsize() == size


async def test_a_body_exactly_16_kib_is_read_and_a_streamed_larger_one_refused(
    api: TestClient[Any, Any], redis: Redis
) -> None:
    at_limit = await api.post(LOGIN_ROUTE, data=padded(BIG), headers={"Content-Type": JSON})
    assert (await at_limit.json())["error"] == "invalid_field"  # read and parsed: login too long
    size = await redis.dbsize()

    async def chunks() -> Any:  # no Content-Length: the reader's own limit must hold
        for _ in range(BIG // 1024 + 1):
            yield b" " * 1024

    streamed = await api.post(LOGIN_ROUTE, data=chunks(), headers={"Content-Type": JSON})
    assert streamed.status == 413
    assert (await streamed.json())["error"] == "body_too_large"
    assert await redis.dbsize() == size


async def test_unknown_routes_and_methods_answer_json(api: TestClient[Any, Any]) -> None:
    missing = await api.get("/v1/nope")
    assert missing.status == 404 and (await missing.json())["error"] == "http_error"
    wrong = await api.put(LOGIN_ROUTE)
    assert wrong.status == 405 and wrong.headers["Allow"] == "POST"
    assert (await wrong.json())["error"] == "http_error"


async def test_malformed_and_foreign_operation_ids_are_404(api: TestClient[Any, Any]) -> None:
    unknown = "op-1-01M8KVZDNBE35GX41B1GG54MAF"
    beyond_partitions = "op-4-01M8KVZDNBE35GX41B1GG54MAF"
    for op in ("garbage", "op-1-", "op-x-1", "op-" + "9" * 40 + "-A", beyond_partitions, unknown):
        reply = await api.get(f"/internal/v1/recovery-operations/{op}", headers=BEARER)
        assert reply.status == 404, op
        assert (await reply.json())["error"] == "unknown_operation"
    for account in ("no-such-account", "bad%20id"):
        reply = await api.get(f"/internal/v1/accounts/{account}/recovery-operation", headers=BEARER)
        assert reply.status == 404 and (await reply.json())["error"] == "no_operation"


async def test_admitting_an_account_the_directory_lacks_is_404(
    api: TestClient[Any, Any], redis: Redis
) -> None:
    reply = await api.post(
        ADMIT_ROUTE, json={"account_id": "ghost", "entry_point": "agent"}, headers=BEARER
    )
    assert reply.status == 404 and (await reply.json())["error"] == "unknown_account"
    assert not [k async for k in redis.scan_iter(f"{PREFIX}:*")]


async def test_directory_failure_is_503_with_retry_after_and_nothing_written(
    redis: Redis, redis_server: Any
) -> None:
    closed = f"http://127.0.0.1:{free_port()}"  # a real directory URL nobody listens on
    settings = admission_settings(redis_server.url, directory_url=closed)
    async with aiohttp.ClientSession() as session:
        directory = HttpDirectory(session, closed, timeout=1.0)
        async with serving(settings, directory=directory) as http:
            reply = await http.post(LOGIN_ROUTE, json={"login": ALICE[0]})
            assert reply.status == 503
            assert reply.headers["Retry-After"] == "5"
            assert (await reply.json())["error"] == "directory_unavailable"
    assert await redis.dbsize() == 0


class BrokenDirectory:
    """A directory with a bug in it (not a store double): it raises what nobody expects."""

    async def lookup_login(self, login: str) -> Account | None:
        raise ZeroDivisionError(f"cannot look up {login}")

    async def get_account(self, account_id: str) -> Account | None:
        raise DirectoryError("unreachable")


async def test_an_unexpected_error_is_a_500_json_without_traceback(
    redis: Redis, redis_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async with serving(admission_settings(redis_server.url), directory=BrokenDirectory()) as http:
        reply = await http.post(LOGIN_ROUTE, json={"login": "carol@example.com"})
        assert reply.status == 500
        body = await reply.json()
        assert body == {
            "error": "internal_error",
            "message": "the request failed; it has been logged",
        }
    record = next(r for r in caplog.records if r.getMessage() == "unhandled error")
    assert record.fields == {"route": LOGIN_ROUTE, "error": "ZeroDivisionError"}  # type: ignore[attr-defined]
    assert record.exc_info is None


async def test_operational_routes(api: TestClient[Any, Any], redis: Redis) -> None:
    """Operational routes answer on the operational listener only; the API's port says 404."""
    await seed_directory(redis)
    await api.post(LOGIN_ROUTE, json={"login": ALICE[0]})
    await api.post(LOGIN_ROUTE, json={"login": "nobody"})
    for path in ("/healthz", "/readyz", "/metrics"):
        assert (await api.get(path)).status == 404
    ops = operational_app("admission", readiness(redis))
    async with TestClient(TestServer(ops, host="127.0.0.1")) as probe:
        assert await (await probe.get("/healthz")).json() == {"status": "ok"}
        ready = await (await probe.get("/readyz")).json()
        assert ready == {"ready": True, "checks": {"redis": True}}
        text = await (await probe.get("/metrics")).text()
    assert 'resetgate_admissions_total{entry_point="public",result="unknown_login"}' in text
    assert (
        'resetgate_http_request_duration_seconds_bucket{le="0.001",method="POST",'
        'route="/v1/password-resets",service="admission",status="202"}' in text
    )
    spec = await (await api.get("/openapi.json")).json()
    assert spec["openapi"].startswith("3.")
    assert not {"/healthz", "/readyz", "/metrics"} & set(spec["paths"])
    assert (
        spec["components"]["schemas"]["PasswordResetRequest"]["properties"]["login"]["maxLength"]
        == 254
    )


async def test_readyz_is_503_when_redis_is_gone(redis_server: Any) -> None:
    settings = admission_settings(f"redis://127.0.0.1:{free_port()}/0", redis_timeout_seconds=0.2)
    async with serving(settings) as http:
        store = http.app[REDIS]
        ops = operational_app("admission", readiness(store))
        async with TestClient(TestServer(ops, host="127.0.0.1")) as probe:
            reply = await probe.get("/readyz")
            assert reply.status == 503
            assert await reply.json() == {"ready": False, "checks": {"redis": False}}
        down = await http.post(LOGIN_ROUTE, json={"login": ALICE[0]})
        assert down.status == 503 and (await down.json())["error"] == "store_unavailable"


async def test_the_http_directory_resolves_logins_and_accounts(
    redis: Redis, redis_server: Any
) -> None:
    """RESETGATE_DIRECTORY_URL: the studio's account service, here a real HTTP server."""
    from aiohttp import web

    accounts = {"acct-dir": {"account_id": "acct-dir", "email": "d@example.com"}}

    async def lookup(request: web.Request) -> web.Response:
        login = request.query.get("login", "")
        if login != "dir.player@example.com":
            return web.json_response({"error": "not found"}, status=404)
        return web.json_response(accounts["acct-dir"])

    async def account(request: web.Request) -> web.Response:
        found = accounts.get(request.match_info["account_id"])
        return web.json_response(found) if found else web.json_response({}, status=404)

    studio = web.Application()
    studio.router.add_get("/accounts/lookup", lookup)
    studio.router.add_get("/accounts/{account_id}", account)
    async with TestServer(studio, host="127.0.0.1") as directory_server:
        url = str(directory_server.make_url(""))
        settings = admission_settings(redis_server.url, directory_url=url)
        async with aiohttp.ClientSession() as session:
            directory = HttpDirectory(session, url, timeout=2.0)
            async with serving(settings, directory=directory) as http:
                known = await http.post(LOGIN_ROUTE, json={"login": "dir.player@example.com"})
                unknown = await http.post(LOGIN_ROUTE, json={"login": "else@example.com"})
                assert (known.status, unknown.status) == (202, 202)
                assert await known.read() == await unknown.read()
                body = {"account_id": "acct-dir", "entry_point": "agent"}
                agent = await http.post(ADMIT_ROUTE, headers=BEARER, json=body)
                assert (await agent.json())["result"] == "converged"
                body = {"account_id": "ghost", "entry_point": "agent"}
                ghost = await http.post(ADMIT_ROUTE, headers=BEARER, json=body)
                assert ghost.status == 404
    live = [k async for k in redis.scan_iter(ANY_PARTITION.live)]
    assert len(live) == 1

"""The internal API's bearer on the real admission process: every internal route in
/openapi.json (so a route added later is covered without editing this test), every method,
every way of getting the credentials wrong -> 401 with WWW-Authenticate and nothing written;
path spellings that try to dodge the /internal/ prefix never reach a handler.

tests/admission/test_edges.py checks six wrong credentials on one method per route
in-process; this module widens that to every method and more credentials, over TCP."""

from __future__ import annotations

import re

import aiohttp
import pytest
from redis.asyncio import Redis

from tests.security.conftest import INTERNAL_TOKEN, Exchange, add_accounts
from tests.support.processes import ServiceProcess

METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "PROPFIND"]
WRONG = [
    None,
    "",
    "Bearer",
    "Bearer ",
    "Bearer wrong-token-0123456789abcdef",
    f"Basic {INTERNAL_TOKEN}",
    f"Token {INTERNAL_TOKEN}",
    f"Bearer {INTERNAL_TOKEN}x",
    f"Bearer {INTERNAL_TOKEN[:-1]}",
    f"Bearer {INTERNAL_TOKEN} {INTERNAL_TOKEN}",
    f"Bearer {INTERNAL_TOKEN.upper()}",
    f"Bearer\t{INTERNAL_TOKEN}x",
    f"Bearer {'A' * 8000}",
]
SAMPLE = {"operation_id": "op-1-01M8KVZDNBE35GX41B1GG54MAF", "account_id": "acct-sec-0"}


async def internal_paths(admission: ServiceProcess) -> list[str]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(admission.url + "/openapi.json") as reply,
    ):
        document = await reply.json()
    paths = []
    for template, operations in document["paths"].items():
        if any(op.get("security") for op in operations.values()):
            paths.append(re.sub(r"\{(\w+)\}", lambda m: SAMPLE[m.group(1)], template))
    return paths


async def test_every_internal_route_and_method_refuses_a_missing_or_wrong_bearer(
    admission: ServiceProcess, redis: Redis
) -> None:
    await add_accounts(redis, 1)
    paths = await internal_paths(admission)
    assert len(paths) == 5 and all(p.startswith("/internal/") for p in paths), paths
    paths.append("/internal/v1/no-such-route")  # unknown internal routes too: no route map leak
    before = await redis.dbsize()
    checked = 0
    async with aiohttp.ClientSession() as session:
        for path in paths:
            for method in METHODS:
                for credentials in WRONG:
                    headers = {} if credentials is None else {"Authorization": credentials}
                    body = {"account_id": "acct-sec-0", "entry_point": "agent"}
                    async with session.request(
                        method, admission.url + path, json=body, headers=headers
                    ) as reply:
                        assert reply.status == 401, (method, path, credentials)
                        assert reply.headers["WWW-Authenticate"].startswith("Bearer realm=")
                        if method != "HEAD":
                            assert (await reply.json())["error"] == "unauthorized"
                    checked += 1
    print(
        f"{checked} requests: {len(paths)} paths x {len(METHODS)} methods x "
        f"{len(WRONG)} credentials, all 401"
    )
    assert await redis.dbsize() == before


async def test_the_right_bearer_is_accepted_with_any_scheme_case(
    admission: ServiceProcess,
) -> None:
    async with aiohttp.ClientSession() as session:
        for scheme in ("Bearer", "bearer", "BEARER"):
            headers = {"Authorization": f"{scheme} {INTERNAL_TOKEN}"}
            url = admission.url + "/internal/v1/recovery-operations?oldest=1"
            async with session.get(url, headers=headers) as reply:
                assert reply.status == 200


DODGES = [
    b"//internal/v1/recovery-operations",
    b"/internal//v1/recovery-operations",
    b"/./internal/v1/recovery-operations",
    b"/v1/../internal/v1/recovery-operations",
    b"/x/../internal/v1/recovery-operations",
    b"/%69nternal/v1/recovery-operations",
    b"/%2e/internal/v1/recovery-operations",
    b"/%2Finternal/v1/recovery-operations",
    b"/internal%2fv1/recovery-operations",
    b"/INTERNAL/v1/recovery-operations",
    b"/internal/v1/recovery-operations/",
    b"/internal/v1/./recovery-operations",
    b"/internal/v1/recovery-operations%00",
    b"/internal/v1/recovery-operations;x",
    b"http://rg/internal/v1/recovery-operations",
    b"//internal/v1/accounts/acct-sec-0/recovery-operation",
    b"\\internal/v1/recovery-operations",
]


@pytest.mark.parametrize("path", DODGES, ids=[d.decode() for d in DODGES])
async def test_a_path_spelled_to_dodge_the_prefix_never_reaches_a_handler(
    admission: ServiceProcess, path: bytes
) -> None:
    reply = await Exchange(admission.port).send(
        b"GET " + path + b" HTTP/1.1\r\nHost: rg\r\nConnection: close\r\n\r\n"
    )
    status = int(reply.split(b" ", 2)[1])
    assert status in (400, 401, 404), reply[:200]
    assert b'"operations"' not in reply.partition(b"\r\n\r\n")[2]  # no listing leaked

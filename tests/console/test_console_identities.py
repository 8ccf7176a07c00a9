"""Who the console takes a request to be, over HTTP: no peer is a trusted proxy unless
configured (loopback included), every X-Forwarded-For line counts for the sign-in limit, and
a proxy's identity is matched whole, never reduced to a local part that others share."""

from __future__ import annotations

from typing import Any

import pytest
from multidict import CIMultiDict
from pydantic import ValidationError
from redis.asyncio import Redis

from shared import control
from shared.keys import AUDIT
from tests.admission.helpers import INTERNAL_TOKEN
from tests.console.helpers import console, console_settings, csrf_from

LIMIT = {"console_sign_in_burst": 3, "console_sign_in_per_minute": 1}
WRONG = {"name": "ann", "token": "nope"}
RIGHT = {"name": "ann", "token": INTERNAL_TOKEN}
USER = "X-Forwarded-User"


async def _sign_in(http: Any, form: dict[str, str], headers: Any) -> int:
    response = await http.post(
        "/console/sign-in", data=form, headers=headers, allow_redirects=False
    )
    return int(response.status)


async def test_loopback_is_no_trusted_proxy_by_default(redis: Redis, redis_server: Any) -> None:
    async with console(console_settings(redis_server.url, **LIMIT)) as http:
        for i in range(3):
            assert await _sign_in(http, WRONG, {"X-Forwarded-For": f"203.0.113.{i}"}) == 401
        # A local client (a port-forward, a sidecar) cannot pick a fresh allowance.
        assert await _sign_in(http, RIGHT, {"X-Forwarded-For": "203.0.113.99"}) == 429
        spoofed = await http.get("/console/", headers={USER: "maria"}, allow_redirects=False)
        assert spoofed.status == 303, "the identity header counts from a configured proxy only"
    with pytest.raises(ValidationError, match="RESETGATE_CONSOLE_TRUSTED_PROXIES"):
        console_settings(redis_server.url, console_proxy_user_header=USER)


async def test_every_forwarded_for_line_counts_for_the_sign_in_limit(
    redis: Redis, redis_server: Any
) -> None:
    settings = console_settings(redis_server.url, **LIMIT, console_trusted_proxies="127.0.0.1/32")
    async with console(settings) as http:
        statuses = []
        for i in range(5):
            # The client's own line first, then the line our proxy added.
            lines = CIMultiDict(
                [("X-Forwarded-For", f"198.18.0.{i}"), ("X-Forwarded-For", "203.0.113.5")]
            )
            statuses.append(await _sign_in(http, WRONG, lines))
        assert statuses == [401, 401, 401, 429, 429]


def _proxy(act_users: str, redis_url: str) -> Any:
    return console_settings(
        redis_url,
        console_proxy_user_header=USER,
        console_trusted_proxies="127.0.0.1/32",
        console_act_users=act_users,
    )


# Each an identity of its own that the old reduction ([A-Za-z0-9._-] of the local part) made
# into "maria", who may act.
OTHERS = ["maria@attacker.example", "mar+ia@studio.example", "mariaé", "Maria", "ma\u200bria"]


@pytest.mark.parametrize("maria", ["maria", "maria@studio.example"])
async def test_proxy_identities_are_matched_whole(
    redis: Redis, redis_server: Any, maria: str
) -> None:
    pause = "/console/partitions/1/pause"
    async with console(_proxy(maria, redis_server.url)) as http:
        assert (await http.get(pause, headers={USER: maria})).status == 200
        own = await csrf_from(http, "/console/", {USER: maria})
        for other in OTHERS:
            if other == "ma\u200bria":  # a zero-width space: not a plain name at all
                continue
            assert (await http.get(pause, headers={USER: other})).status == 403, other
            assert await csrf_from(http, "/console/", {USER: other}) != own, other
            refused = await http.post(
                pause, data={"reason": "x", "csrf": own}, headers={USER: other}
            )
            assert refused.status == 403, other
        assert 1 not in (await control.read(redis)).paused and not await redis.xlen(AUDIT)


@pytest.mark.parametrize("sent", ["marie\u0301", "ma\u200bria", "\u202eairam", "maria one"])
async def test_a_name_that_is_not_one_plain_nfc_name_is_refused(
    redis: Redis, redis_server: Any, sent: str
) -> None:
    async with console(_proxy("marié,maria", redis_server.url)) as http:
        page = await http.get("/console/", headers={USER: sent})
        assert page.status == 403 and "NFC" in await page.text()
        twice = CIMultiDict([(USER, "maria"), (USER, "maria")])
        assert (await http.get("/console/", headers=twice)).status == 403

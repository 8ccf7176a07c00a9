"""``POST /v1/password-resets``: the game's "forgot password" form (and its resend clicks).

Whatever happens behind it - unknown login, cooldown, convergence, creation - the answer is
the same 202 body, and an unknown login runs the same script with the same round trips, so
neither the body nor the timing tells an attacker which logins exist. The login is never
logged: logins are often email addresses.
"""

from __future__ import annotations

import logging

from aiohttp import web

from services.admission.context import DIRECTORY, GATE, LIMITER, SETTINGS
from services.admission.http import read_body
from services.admission.ratelimit import client_address
from services.admission.schemas import PASSWORD_RESET
from shared import codec, metrics
from shared.logging import event
from shared.model import EntryPoint
from shared.service import json_error

log = logging.getLogger("services.admission")

RECEIVED_BODY = codec.dumps({"status": "received"})
_PUBLIC = str(EntryPoint.PUBLIC)


def received() -> web.Response:
    return web.Response(body=RECEIVED_BODY, status=202, content_type="application/json")


async def password_reset(request: web.Request) -> web.Response:
    app = request.app
    body = await read_body(request, PASSWORD_RESET)
    settings = app[SETTINGS]
    address = client_address(
        request.remote, request.headers.get("X-Forwarded-For"), settings.trusted_proxy_hops
    )
    decision = await app[LIMITER].check(address)
    if not decision.allowed:
        metrics.admissions.labels(_PUBLIC, "rejected").inc()
        return json_error(
            429,
            "rate_limited",
            "too many requests from this network; retry later",
            **{"Retry-After": str(decision.retry_after_seconds)},
        )
    account = await app[DIRECTORY].lookup_login(body["login"])
    if account is None:
        await app[GATE].admit_unknown(body["login"])
        result = "unknown_login"
    else:
        admission = await app[GATE].admit(account.account_id, _PUBLIC)
        result = str(admission.result)
    metrics.admissions.labels(_PUBLIC, result).inc()
    event(log, logging.DEBUG, "public admission", result=result)
    return received()

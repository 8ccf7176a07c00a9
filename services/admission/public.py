"""``POST /v1/password-resets``: the game's "forgot password" form (and its resend clicks).

Whatever happens behind it - unknown login, cooldown, convergence, creation - the answer is
the same 202 body, and an unknown login runs the same script with the same round trips; the
answer is held until a fixed floor after the request (RESETGATE_PUBLIC_RESPONSE_FLOOR_MS), so
neither the body nor the timing tells an attacker which logins exist. The login is never
logged: logins are often email addresses.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiohttp import web
from opentelemetry.trace import get_current_span

from services.admission.context import BUDGET, DIRECTORY, GATE, LIMITER, SETTINGS
from services.admission.http import read_body
from services.admission.ratelimit import request_client
from services.admission.schemas import PASSWORD_RESET
from shared import codec, metrics, tracing
from shared.clock import to_seconds
from shared.logging import event
from shared.model import EntryPoint
from shared.service import json_error

log = logging.getLogger("services.admission")

RECEIVED_BODY = codec.dumps({"status": "received"})
_PUBLIC = str(EntryPoint.PUBLIC)
_COUNTERS: dict[str, Any] = {}
TRACER = tracing.tracer(__name__)


def received() -> web.Response:
    return web.Response(body=RECEIVED_BODY, status=202, content_type="application/json")


async def password_reset(request: web.Request) -> web.Response:
    """One span per request, a child of the HTTP server span (the aiohttp instrumentation's),
    which continues the game's trace when it sends a ``traceparent``."""
    with TRACER.start_as_current_span("recovery request"):
        return await _password_reset(request)


async def _password_reset(request: web.Request) -> web.Response:
    app = request.app
    body = await read_body(request, PASSWORD_RESET)
    settings = app[SETTINGS]
    address = request_client(request, settings.trusted_proxy_hops)
    decision = await app[LIMITER].check(address)
    if not decision.allowed:
        _count("rejected")
        return json_error(
            429,
            "rate_limited",
            "too many requests from this network; retry later",
            **{"Retry-After": str(decision.retry_after_seconds)},
        )
    floor = settings.public_response_floor_ms
    deadline = asyncio.get_running_loop().time() + to_seconds(floor) if floor else None
    try:
        result = await _admit(app, body["login"])
    except Exception:
        await _sleep_until(deadline)  # a 503 must not be quicker for one kind of login either
        raise
    await _sleep_until(deadline)
    _count(result)
    get_current_span().set_attribute(tracing.RESULT, result)
    if log.isEnabledFor(logging.DEBUG):
        event(log, logging.DEBUG, "public admission", result=result)
    return received()


def _count(result: str) -> None:
    counter = _COUNTERS.get(result)
    if counter is None:  # labels() once per result, not once per request
        counter = _COUNTERS[result] = metrics.admissions.labels(_PUBLIC, result)
    counter.inc()


async def _admit(app: web.Application, login: str) -> str:
    """Within the public budget (services/admission/budget.py): a creation takes one, and
    one that created nothing gives it back. An unknown login looks at the budget the same
    way; a give-back's extra round trip is under the floor like the rest."""
    account = await app[DIRECTORY].lookup_login(login)
    budget = app[BUDGET]
    if account is None:
        await budget.look()
        await app[GATE].admit_unknown(login)
        return "unknown_login"
    taken = await budget.take()
    if not taken.allowed:
        return "budget_exhausted"
    try:
        admission = await app[GATE].admit(account.account_id, _PUBLIC)
    except Exception:
        await budget.give_back(taken)
        raise
    if not admission.created:
        await budget.give_back(taken)
    if admission.operation_id:
        get_current_span().set_attribute(tracing.OPERATION_ID, admission.operation_id)
    return str(admission.result)


async def _sleep_until(deadline: float | None) -> None:
    """Answer no sooner than the floor: the same commands still cost different times (a
    creation writes an operation and a job, a dry run writes nothing: tests/security/
    test_timing.py measures tens of µs between them), and only a floor above the work makes
    every kind take the same time. An answer whose work took longer
    is counted: the floor did not hide it. ``None``: no floor (0, as benchmarks of capacity
    set it)."""
    if deadline is None:
        return
    delay = deadline - asyncio.get_running_loop().time()
    if delay > 0:
        await asyncio.sleep(delay)
    else:
        metrics.public_floor_passed.inc()

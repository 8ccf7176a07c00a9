"""What changes something: sign-in and sign-out, and the on-call actions (quarantine,
release, review release or close, pause and resume a partition), each behind a
confirmation page, refused without the act role, and recorded with the actor by
``shared.actions``."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from services.admission.console import auth
from services.admission.console.context import (
    PRINCIPAL,
    REDIS,
    SETTINGS,
    SIGN_IN_LIMITER,
    Principal,
)
from services.admission.console.html import Markup, render
from services.admission.console.pages import csrf_of, message, notice, operation_href, page
from shared import actions, operation_views
from shared.logging import event
from shared.model import CLOSABLE, QUARANTINABLE, RELEASABLE, State

log = logging.getLogger("services.admission.console")


# -- sign-in -------------------------------------------------------------------------------
def _sign_in_page(
    request: web.Request, status: int = 200, flash: Markup | None = None
) -> web.Response:
    minutes = request.app[SETTINGS].console_session_seconds // 60
    return page(request, "Sign in", render("sign_in", minutes=minutes), status, flash)


async def sign_in_form(request: web.Request) -> web.Response:
    if request.get(PRINCIPAL) is not None:
        raise web.HTTPSeeOther("/console/")
    return _sign_in_page(request)


async def sign_in(request: web.Request) -> web.StreamResponse:
    """Exchange the internal API token for a short session (the token is never kept)."""
    if auth.cross_site(request):
        return message(request, 403, "Sign in", "Sign in from the console's own page.")
    form = await request.post()
    token = str(form.get("token", ""))
    client = auth.sign_in_client(request, request.app[SETTINGS])
    limiter = request.app[SIGN_IN_LIMITER]
    decision = await limiter.check(client)
    if not decision.allowed:
        event(log, logging.WARNING, "console sign-in rate limited")
        return _wait(request, decision.retry_after_seconds)
    if not token or not auth.token_matches(request.app[SETTINGS], token):
        event(log, logging.WARNING, "console sign-in refused")
        return _sign_in_page(request, 401, notice("That token is not valid.", bad=True))
    await limiter.forget(client)  # a sign-in that worked: its earlier attempts were no guesses
    session_id, principal = await auth.open_session(request.app, str(form.get("name", "")))
    event(log, logging.INFO, "console sign-in", actor=principal.actor, via="token")
    response = web.HTTPSeeOther("/console/")
    auth.set_cookie(response, request.app[SETTINGS], session_id)
    raise response


def _wait(request: web.Request, seconds: int) -> web.Response:
    """Too many attempts from this address: the same answer whatever token was sent."""
    text = f"Too many sign-in attempts from your address. Wait {seconds} s, then try again."
    response = message(request, 429, "Sign in", text, "/console/sign-in")
    response.headers["Retry-After"] = str(seconds)
    return response


async def sign_out(request: web.Request) -> web.StreamResponse:
    await auth.end_session(request, request[PRINCIPAL])
    response = web.HTTPSeeOther("/console/sign-in?result=signed-out")
    auth.clear_cookie(response, request.app[SETTINGS])
    raise response


# -- confirmations and actions -------------------------------------------------------------
def _actor(request: web.Request) -> Principal:
    principal: Principal = request[PRINCIPAL]
    if not principal.can_act:
        raise web.HTTPForbidden()
    return principal


NO_FIELDS = Markup("")


def _confirm(
    request: web.Request,
    title: str,
    question: str,
    label: str,
    back: str,
    fields: Markup = NO_FIELDS,
) -> web.Response:
    body = render(
        "confirm",
        question=question,
        action=request.path,
        fields=fields,
        csrf=csrf_of(request),
        confirm=label,
        back=back,
    )
    return page(request, title, body)


REASON_FIELD = Markup(
    '<label for="reason">Reason '
    '<span class="hint">(recorded with your name; no addresses)</span></label>'
    '<input id="reason" name="reason" type="text" required maxlength="200">'
)


async def _state(request: web.Request, operation_id: str) -> State | None:
    detail = await operation_views.find_operation(
        request.app[REDIS], operation_id, request.app[SETTINGS].partitions
    )
    return detail.operation.state if detail else None


def _not_in_state(request: web.Request, title: str, why: str) -> web.Response:
    """The 409 of an action the operation's state does not allow, linking back to it."""
    return message(request, 409, title, why, operation_href(request.match_info["operation_id"]))


async def confirm_quarantine(request: web.Request) -> web.Response:
    _actor(request)
    operation_id = request.match_info["operation_id"]
    if await _state(request, operation_id) not in QUARANTINABLE:
        return _not_in_state(
            request, "Quarantine", "This operation cannot be quarantined in its state."
        )
    question = (
        f"Quarantine {operation_id}? It stops being sent and keeps its id and token "
        "until someone releases it."
    )
    return _confirm(
        request, "Quarantine", question, "Quarantine", operation_href(operation_id), REASON_FIELD
    )


async def confirm_release(request: web.Request) -> web.Response:
    _actor(request)
    operation_id = request.match_info["operation_id"]
    state = await _state(request, operation_id)
    if state not in RELEASABLE:
        return _not_in_state(
            request, "Release", "This operation is neither quarantined nor held for review."
        )
    held = "held for review" if state is State.REVIEW else "quarantined"
    question = (
        f"Release {operation_id} ({held})? It goes back to the send queue with the same id "
        "and token; the provider's idempotency key keeps a second email from being sent."
    )
    return _confirm(request, "Release", question, "Release", operation_href(operation_id))


async def confirm_close(request: web.Request) -> web.Response:
    _actor(request)
    operation_id = request.match_info["operation_id"]
    if await _state(request, operation_id) not in CLOSABLE:
        return _not_in_state(request, "Close", "This operation is not held for review.")
    question = (
        f"Close {operation_id} without sending it? It ends as failed: no email is sent for "
        "it, and the account must ask again to get one."
    )
    return _confirm(request, "Close", question, "Close", operation_href(operation_id), REASON_FIELD)


async def _after_hold(
    request: web.Request, outcome: actions.ActionResult, done: str
) -> web.Response:
    operation_id = request.match_info["operation_id"]
    if outcome.done:
        raise web.HTTPSeeOther(f"{operation_href(operation_id)}?result={done}")
    return message(
        request,
        409,
        "Refused",
        f"Refused: the operation is {outcome.state}.",
        operation_href(operation_id),
    )


async def _reason(request: web.Request) -> str:
    form = await request.post()
    return str(form.get("reason", "")).strip()


def _no_reason(request: web.Request, title: str) -> web.Response:
    return message(request, 422, title, "Give a reason.", request.path)


async def quarantine(request: web.Request) -> web.Response:
    principal = _actor(request)
    if not (reason := await _reason(request)):
        return _no_reason(request, "Quarantine")
    outcome = await actions.quarantine(
        request.app[REDIS], request.match_info["operation_id"], principal.actor, reason
    )
    return await _after_hold(request, outcome, "quarantined")


async def release(request: web.Request) -> web.Response:
    principal = _actor(request)
    outcome = await actions.release(
        request.app[REDIS], request.match_info["operation_id"], principal.actor
    )
    return await _after_hold(request, outcome, "released")


async def close(request: web.Request) -> web.Response:
    principal = _actor(request)
    if not (reason := await _reason(request)):
        return _no_reason(request, "Close")
    outcome = await actions.close(
        request.app[REDIS],
        request.match_info["operation_id"],
        principal.actor,
        reason,
        request.app[SETTINGS].retention_ms,
    )
    return await _after_hold(request, outcome, "closed")


def _partition(request: web.Request) -> int:
    raw = request.match_info["partition"]
    if not (raw.isascii() and raw.isdigit()) or int(raw) >= request.app[SETTINGS].partitions:
        raise web.HTTPNotFound()
    return int(raw)


async def confirm_pause(request: web.Request) -> web.Response:
    _actor(request)
    p = _partition(request)
    question = (
        f"Pause partition {p}? Senders stop taking its work within about a second; "
        "admission keeps queueing, nothing is lost."
    )
    return _confirm(
        request, "Pause partition", question, "Pause", "/console/providers", REASON_FIELD
    )


async def confirm_resume(request: web.Request) -> web.Response:
    _actor(request)
    p = _partition(request)
    return _confirm(
        request,
        "Resume partition",
        f"Resume partition {p}? Senders take its work again.",
        "Resume",
        "/console/providers",
    )


async def pause(request: web.Request) -> web.Response:
    principal = _actor(request)
    if not (reason := await _reason(request)):
        return _no_reason(request, "Pause partition")
    await actions.pause(request.app[REDIS], [_partition(request)], principal.actor, reason)
    raise web.HTTPSeeOther("/console/providers?result=paused")


async def resume(request: web.Request) -> web.Response:
    principal = _actor(request)
    await actions.resume(request.app[REDIS], [_partition(request)], principal.actor)
    raise web.HTTPSeeOther("/console/providers?result=resumed")


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def add_routes(app: web.Application) -> None:
    app.router.add_route("GET", "/console/sign-in", sign_in_form)
    app.router.add_route("POST", "/console/sign-in", sign_in)
    app.router.add_route("POST", "/console/sign-out", sign_out)
    # Each action at its path: GET asks to confirm it, POST takes it.
    actions: list[tuple[str, Handler, Handler]] = [
        ("/console/operations/{operation_id}/quarantine", confirm_quarantine, quarantine),
        ("/console/operations/{operation_id}/release", confirm_release, release),
        ("/console/operations/{operation_id}/close", confirm_close, close),
        ("/console/partitions/{partition}/pause", confirm_pause, pause),
        ("/console/partitions/{partition}/resume", confirm_resume, resume),
    ]
    for path, confirm, act in actions:
        app.router.add_route("GET", path, confirm)
        app.router.add_route("POST", path, act)

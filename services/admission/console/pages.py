"""Whole pages: the layout around a body, the strict headers on every answer, and errors
rendered as pages (never a traceback, never the request's own text echoed back)."""

from __future__ import annotations

import logging
from urllib.parse import quote

from aiohttp import web
from aiohttp.typedefs import Handler
from redis.exceptions import RedisError

from services.admission.console.auth import csrf_token
from services.admission.console.context import CSRF_KEY, PRINCIPAL, Principal
from services.admission.console.html import Markup, escape, render
from shared.logging import event
from shared.redis import TRANSIENT_ERRORS

log = logging.getLogger("services.admission.console")

# Nothing but our own script and stylesheet, no framing, no caching, no referrer.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
    "Pragma": "no-cache",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=(), interest-cohort=()",
}

# What an action's redirect may announce (?result=…): fixed texts, nothing from the request.
NOTICES = {
    "quarantined": (
        "Quarantined. The operation keeps its id and token and is not sent until released."
    ),
    "released": "Released. The operation is back in the send queue with the same id and token.",
    "closed": "Closed. The operation ended as failed; nothing is sent for it.",
    "paused": "Paused. Senders stop taking this partition's work within about a second.",
    "resumed": "Resumed. Senders take this partition's work again.",
    "provider-resumed": "Provider resumed. Senders send through it again within about a second.",
    "switched": "Switched. The partitions send through their new provider and are resumed.",
    "by-login": "Found by login: the account directory names this account.",
    "progressive": "Progressive switch asked: the senders move one partition first; its "
    "steps show below.",
    "progressive-stop": "Asked to stop: the senders stop the switch within a second or two.",
    "signed-out": "Signed out.",
}


def operation_href(operation_id: str) -> str:
    return "/console/operations/" + quote(operation_id, safe="")


def principal_of(request: web.Request) -> Principal | None:
    return request.get(PRINCIPAL)


def csrf_of(request: web.Request) -> str:
    principal = principal_of(request)
    return csrf_token(request.app[CSRF_KEY], principal) if principal else ""


def notice(text: str, bad: bool = False) -> Markup:
    role = "alert" if bad else "status"
    return Markup(f'<p class="notice{" bad" if bad else ""}" role="{role}">{escape(text)}</p>')


def _nav(request: web.Request) -> Markup:
    principal = principal_of(request)
    if principal is None:
        return Markup("")
    roles = "read and act" if principal.can_act else "read only"
    return render("nav", actor=principal.actor, roles=roles, csrf=csrf_of(request))


def page(
    request: web.Request, title: str, body: Markup, status: int = 200, flash: Markup | None = None
) -> web.Response:
    if flash is None:
        text = NOTICES.get(request.query.get("result", ""))
        flash = notice(text) if text else Markup("")
    html = render("layout", title=title, nav=_nav(request), notice=flash, body=body)
    return web.Response(text=html, status=status, content_type="text/html", charset="utf-8")


def message(
    request: web.Request, status: int, title: str, text: str, back: str = "/console/"
) -> web.Response:
    body = render("message", message=text, back=back, back_text="Back")
    return page(request, title, body, status)


@web.middleware
async def security_headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        response = await handler(request)
    except web.HTTPException as error:  # redirects and errors carry the headers too
        error.headers.update(SECURITY_HEADERS)
        raise
    response.headers.update(SECURITY_HEADERS)
    return response


@web.middleware
async def html_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPNotFound:
        return message(request, 404, "Not found", "There is no such page.")
    except web.HTTPForbidden:
        return message(request, 403, "Not allowed", "This needs the act role; you can read only.")
    except web.HTTPMethodNotAllowed:
        return message(request, 405, "Not allowed", "This page does not take that method.")
    except web.HTTPException:
        raise
    except (RedisError, *TRANSIENT_ERRORS, TimeoutError) as error:
        event(log, logging.WARNING, "console: store unavailable", error=type(error).__name__)
        return message(
            request, 503, "Store unavailable", "The operation store did not answer; retry."
        )
    except Exception as error:
        event(log, logging.ERROR, "console: unhandled error", error=type(error).__name__)
        return message(request, 500, "Something failed", "The request failed; it has been logged.")

"""A minimal reset page for local runs, so the whole loop can be tried by hand: the email's
link opens it, submitting it consumes the token.

In production the game owns this page and calls ``POST /internal/v1/reset-tokens/consume``;
here it is served only with ``RESETGATE_LOCAL_RESET_PAGE=true`` (``resetgate up`` sets it,
the chart never does). Opening the link (GET) consumes nothing: mail scanners fetch links
before people do; it only reads whether the link still works, so a used or expired one says
so before the form. The page keeps no password; it only shows that the token worked once.
"""

from __future__ import annotations

from html import escape

from aiohttp import web

from services.admission.context import REDIS, SETTINGS, TOKEN_KEYS
from services.admission.internal import REFUSED
from services.admission.tokens import consume, refusal
from shared.scripts.admission import ConsumeResult

PATH = "/reset-password"
_FIELD_LIMIT = 256
_HEADERS = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Reset your password (local)</title></head>
<body><h1>Reset your password</h1>{body}
<p><small>resetgate local reset page: the game serves this page in production.</small></p>
</body></html>"""

_FORM = """<form method="post" action="{path}">
<input type="hidden" name="operation" value="{operation}">
<input type="hidden" name="token" value="{token}">
<label>New password <input type="password" name="password" autocomplete="new-password"></label>
<button type="submit">Set the new password</button></form>"""


def _page(body: str, status: int = 200) -> web.Response:
    return web.Response(
        text=_PAGE.format(body=body), status=status, content_type="text/html", headers=_HEADERS
    )


def _fields(source: object) -> tuple[str, str] | None:
    get = getattr(source, "get", None)
    if get is None:
        return None
    operation, token = str(get("operation", "")), str(get("token", ""))
    if not operation or not token or max(len(operation), len(token)) > _FIELD_LIMIT:
        return None
    return operation, token


async def show_form(request: web.Request) -> web.Response:
    fields = _fields(request.query)
    if fields is None:
        return _page("<p>This link is incomplete: open the whole link from the email.</p>", 400)
    app = request.app
    refused = await refusal(app[REDIS], app[TOKEN_KEYS], app[SETTINGS].partitions, *fields)
    if refused is not None:  # a used or expired link says so now, not after a new password
        return _refused(refused)
    operation, token = (escape(value, quote=True) for value in fields)
    return _page(_FORM.format(path=PATH, operation=operation, token=token))


def _refused(result: ConsumeResult) -> web.Response:
    status, _, message = REFUSED[result]
    return _page(f"<p>This link does not work: {escape(message)}.</p>", status)


async def submit(request: web.Request) -> web.Response:
    fields = _fields(await request.post())
    if fields is None:
        return _page("<p>The form came back incomplete: open the link from the email.</p>", 400)
    app = request.app
    result, _ = await consume(app[REDIS], app[TOKEN_KEYS], app[SETTINGS].partitions, *fields)
    if result is not ConsumeResult.CONSUMED:
        return _refused(result)
    return _page(
        "<p>Done: the link worked and is now used up. (A game would save the new password "
        "here; this local page keeps nothing.)</p>"
    )


def add_routes(app: web.Application) -> None:
    app.router.add_get(PATH, show_form)
    app.router.add_post(PATH, submit)

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
from services.admission.resetpage_text import PageText, for_browser
from services.admission.tokens import consume, refusal
from shared.scripts.admission import ConsumeResult

PATH = "/reset-password"
_FIELD_LIMIT = 256
_HEADERS = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}

_PAGE = """<!doctype html>
<html lang="{lang}"><head><meta charset="utf-8"><title>{title}</title></head>
<body><h1>{heading}</h1>{body}
<p><small>{footer}</small></p>
</body></html>"""

_FORM = """<form method="post" action="{path}">
<input type="hidden" name="operation" value="{operation}">
<input type="hidden" name="token" value="{token}">
<label>{password} <input type="password" name="password" autocomplete="new-password"></label>
<button type="submit">{submit}</button></form>"""


def _text(request: web.Request) -> tuple[str, PageText]:
    """The player's language, as their browser asks for it (resetpage_text)."""
    return for_browser(request.headers.get("Accept-Language", ""))


def _page(request: web.Request, body: str, status: int = 200) -> web.Response:
    lang, text = _text(request)
    html = _PAGE.format(
        lang=lang,
        title=escape(text.title),
        heading=escape(text.heading),
        footer=escape(text.footer),
        body=body,
    )
    return web.Response(text=html, status=status, content_type="text/html", headers=_HEADERS)


def _said(sentence: str) -> str:
    return f"<p>{escape(sentence)}</p>"


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
    _, text = _text(request)
    if fields is None:
        return _page(request, _said(text.incomplete_link), 400)
    app = request.app
    refused = await refusal(app[REDIS], app[TOKEN_KEYS], app[SETTINGS].partitions, *fields)
    if refused is not None:  # a used or expired link says so now, not after a new password
        return _refused(request, refused)
    operation, token = (escape(value, quote=True) for value in fields)
    form = _FORM.format(
        path=PATH,
        operation=operation,
        token=token,
        password=escape(text.password),
        submit=escape(text.submit),
    )
    return _page(request, form)


def _refused(request: web.Request, result: ConsumeResult) -> web.Response:
    status = REFUSED[result][0]
    _, text = _text(request)
    return _page(request, _said(text.refused.format(why=text.why[result])), status)


async def submit(request: web.Request) -> web.Response:
    fields = _fields(await request.post())
    _, text = _text(request)
    if fields is None:
        return _page(request, _said(text.incomplete_form), 400)
    app = request.app
    result, _ = await consume(app[REDIS], app[TOKEN_KEYS], app[SETTINGS].partitions, *fields)
    if result is not ConsumeResult.CONSUMED:
        return _refused(request, result)
    return _page(request, _said(text.done))


def add_routes(app: web.Application) -> None:
    app.router.add_get(PATH, show_form)
    app.router.add_post(PATH, submit)

"""The sandbox as a mail catcher: ``/_sandbox/inbox`` lists every email it received, newest
first (recipient, subject, the provider dialect it spoke, the delivery status the sandbox
itself reports, bounce or not, and what resetgate says of the operation), and
``/_sandbox/inbox/{id}`` shows one as the player would see it, its plain part and its link.

The sandbox's own status and resetgate's can differ, and both are shown: in a provider mode
whose events are pushed (Postmark) the sandbox's feed is what it planned; resetgate's is what
reached its store. resetgate's view is asked from admission's internal API when
``RESETGATE_SANDBOX_INBOX_RESETGATE_URL`` is set (`resetgate up` sets it), with a short
timeout: an unanswered question shows as "unknown", never as a status.
"""

from __future__ import annotations

import asyncio
import html
import re

import aiohttp
from aiohttp import web

from services.sandbox.responses import SANDBOX
from services.sandbox.state import Sandbox
from services.sandbox.store import Message, rfc3339

PATH = "/_sandbox/inbox"
ROWS = 200  # the newest emails listed; older ones stay reachable by id
ASK_TIMEOUT = aiohttp.ClientTimeout(total=2)
LINK = re.compile(r"https?://[^\s<>\"']+")
UNKNOWN = "unknown"
STYLE = (
    "body{font:14px system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse}"
    "td,th{padding:.3em .8em;border-bottom:1px solid #ddd;text-align:left}"
    ".bounce{color:#b00;font-weight:bold}iframe{width:100%;height:30em;border:1px solid #ccc}"
    "pre{white-space:pre-wrap;background:#f6f6f6;padding:1em}"
)


def page(title: str, body: str) -> web.Response:
    text = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
        f"</title><style>{STYLE}</style></head><body>{body}</body></html>"
    )
    # The emails' HTML is shown only inside a sandboxed iframe: no script of theirs runs.
    headers = {"Content-Security-Policy": "script-src 'none'"}
    return web.Response(text=text, content_type="text/html", headers=headers)


async def resetgate_delivery(
    sandbox: Sandbox, session: aiohttp.ClientSession, message: Message
) -> str:
    """What resetgate's store says of the message's operation (its delivery, else its
    state), or "unknown" when it cannot be asked or does not answer."""
    base = sandbox.settings.inbox_resetgate_url
    if not base or message.operation_id is None:
        return UNKNOWN
    token = sandbox.settings.inbox_resetgate_token.get_secret_value()
    url = f"{base}/internal/v1/recovery-operations/{message.operation_id}"
    try:
        async with session.get(url, headers={"Authorization": f"Bearer {token}"}) as reply:
            if reply.status != 200:
                return UNKNOWN
            view = await reply.json()
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return UNKNOWN
    return str(view.get("delivery") or view.get("state") or UNKNOWN)


async def resetgate_views(sandbox: Sandbox, messages: list[Message]) -> list[str]:
    async with aiohttp.ClientSession(timeout=ASK_TIMEOUT) as session:
        return await asyncio.gather(*(resetgate_delivery(sandbox, session, m) for m in messages))


def bounced(status: str) -> bool:
    return status == "bounced"


def bounce_cell(sandbox_status: str, resetgate: str) -> str:
    if bounced(sandbox_status) or bounced(resetgate):
        return "<td class='bounce'>bounce</td>"
    return "<td>no</td>"


def row(message: Message, mode: str, resetgate: str) -> str:
    body = message.body
    subject = html.escape(str(body.get("subject") or "(no subject)"))
    cells = [
        rfc3339(message.created_at),
        ", ".join(map(str, body.get("to") or [])),
        f"<a href='{PATH}/{html.escape(message.id)}'>{subject}</a>",
        mode,
        message.status,
    ]
    escaped = [c if c.startswith("<a ") else html.escape(c) for c in cells]
    tds = "".join(f"<td>{c}</td>" for c in escaped)
    return (
        f"<tr class='email'>{tds}{bounce_cell(message.status, resetgate)}"
        f"<td>{html.escape(resetgate)}</td></tr>"
    )


async def inbox(request: web.Request) -> web.Response:
    sandbox = request.app[SANDBOX]
    sandbox.store.materialize()  # events already due count, as the feed would report them
    newest = list(reversed(list(sandbox.store.messages.values())))[:ROWS]
    views = await resetgate_views(sandbox, newest)
    mode = sandbox.settings.mode
    rows = "".join(row(m, mode, v) for m, v in zip(newest, views, strict=True))
    head = "".join(
        f"<th>{h}</th>"
        for h in ("received", "to", "subject", "dialect", "sandbox status", "bounce", "resetgate")
    )
    count = len(sandbox.store.messages)
    body = (
        f"<h1>Sandbox inbox</h1><p>{count} emails received (newest first; the newest {ROWS} "
        f"listed); this sandbox speaks {html.escape(mode)}'s API.</p>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
    )
    return page("Sandbox inbox", body)


def reset_link(text: str) -> str:
    """The first link of the plain part (a reset email holds one)."""
    found = LINK.search(text)
    return found.group(0) if found else ""


async def one_email(request: web.Request) -> web.Response:
    sandbox = request.app[SANDBOX]
    sandbox.store.materialize()
    message = sandbox.store.get(request.match_info["message_id"])
    if message is None:
        return page(
            "Not found",
            f"<p>No such email (never received, or evicted). "
            f"<a href='{PATH}'>Back to the inbox</a></p>",
        )
    [resetgate] = await resetgate_views(sandbox, [message])
    body = message.body
    text, link = str(body.get("text") or ""), reset_link(str(body.get("text") or ""))
    facts = {
        "to": ", ".join(map(str, body.get("to") or [])),
        "from": str(body.get("from") or ""),
        "subject": str(body.get("subject") or ""),
        "dialect": sandbox.settings.mode,
        "sandbox status": message.status,
        "resetgate": resetgate,
        "bounce": "bounce" if bounced(message.status) or bounced(resetgate) else "no",
    }
    listed = "".join(
        f"<tr><th>{k}</th><td class='{k.replace(' ', '-')}'>{html.escape(v)}</td></tr>"
        for k, v in facts.items()
    )
    rendered = html.escape(str(body.get("html") or ""), quote=True)
    anchor = f"<a id='reset-link' href='{html.escape(link)}'>{html.escape(link)}</a>"
    return page(
        facts["subject"] or "email",
        (
            f"<p><a href='{PATH}'>&larr; inbox</a></p><table>{listed}</table>"
            f'<h2>As the player sees it</h2><iframe sandbox srcdoc="{rendered}"></iframe>'
            f"<h2>Its link</h2><p>{anchor if link else '(none)'}</p>"
            f"<h2>Plain part</h2><pre>{html.escape(text)}</pre>"
        ),
    )


def add_routes(app: web.Application) -> None:
    app.router.add_get(PATH, inbox)
    app.router.add_get(PATH + "/{message_id}", one_email)

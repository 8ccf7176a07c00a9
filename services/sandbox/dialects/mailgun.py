"""Mailgun as documented: https://documentation.mailgun.com/docs/mailgun/api-reference/send/mailgun/messages
(``POST /v3/{domain}/messages``, basic auth ``api:<key>``, form fields, ``v:`` variables;
200 ``{"id": "<…>", "message": "Queued. Thank you."}``),
https://documentation.mailgun.com/docs/mailgun/quickstart-guide/responses (400 with a
"message"; 401 "Forbidden"; 429; 500) and
https://documentation.mailgun.com/docs/mailgun/api-reference/send/mailgun/events
(``GET /v3/{domain}/events``, ``{"items": [...], "paging": {...}}``; its filter fields
are event, list, attachment, from, message-id, subject, to, size, recipient(s), tags and
severity: ``user-variables`` is not one, and is ignored); templates:
https://documentation.mailgun.com/docs/mailgun/user-manual/sending-messages/send-templates
(``template`` and ``t:variables``, a JSON object, in place of text and html; a template
name the domain lacks is accepted and never sent, sargue/mailgun#41, so no
missing-template answer here)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Awaitable, Callable
from email.utils import formatdate
from typing import Any

from aiohttp import web

from services.sandbox.modes import Dialect, Parsed, taken, taken_templated
from services.sandbox.responses import json_response
from services.sandbox.state import Sandbox
from services.sandbox.store import Event, Message
from services.sandbox.webhooks import ACCEPTED, Hook, Pending, Post, Signing

DOMAIN = "{domain}"


def _message(status: int, text: str, headers: dict[str, str] | None = None) -> web.Response:
    return json_response({"message": text}, status, headers)


# Refusals of the whole domain or account, as Mailgun words them (API Response Codes: 400
# "will typically contain a JSON response with a message"; 404 "Domain not found: <domain>"
# is also what a domain registered in the EU region gets on the US base URL, see
# documentation.mailgun.com/docs/mailgun/api-reference/send/mailgun/messages on regions).
REFUSALS = {
    "domain_not_allowed": (
        400,
        "Domain {domain} is not allowed to send: Please activate "
        "your Mailgun account. Check your inbox or log in to your "
        "control panel to resend the activation email.",
    ),
    "account_not_activated": (
        400,
        "Please activate your Mailgun account. Check your inbox "
        "or log in to your control panel to resend the activation "
        "email.",
    ),
    "free_account": (
        400,
        "Free accounts are for test purposes only. Please upgrade or add "
        "the address to authorized recipients in Account Settings.",
    ),
    "domain_not_found": (404, "Domain not found: {domain}"),
    # Not documented anywhere: what the refusals guard exists for.
    "undocumented": (400, "Sandbox: refused by a rule no documentation names"),
}


async def _wrong_base_url(_request: web.Request) -> web.Response:
    """A 404 without Mailgun's JSON: "a mistake in the API request, such as a non-existing
    endpoint" (documentation.mailgun.com/docs/mailgun/quickstart-guide/responses), what a
    base URL ending in /v3 (…/v3/v3/{domain}/messages) gets."""
    return web.Response(status=404, text="404 page not found\n", content_type="text/plain")


def _refusal(name: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    if name == "wrong_base_url":
        return _wrong_base_url
    status, text = REFUSALS[name]

    async def refuse(request: web.Request) -> web.Response:
        return _message(status, text.format(domain=request.match_info.get("domain", "")))

    return refuse


def authorized(request: web.Request, key: str) -> bool:
    expected = "Basic " + base64.b64encode(f"api:{key}".encode()).decode()
    return hmac.compare_digest(request.headers.get("Authorization", "").encode(), expected.encode())


async def parse(request: web.Request, limit: int) -> Parsed:
    if request.content_length is not None and request.content_length > limit:
        return _message(413, "Request entity too large")
    form = await request.post()
    to = [str(v) for v in form.getall("to", [])]
    if not form.get("from"):
        return _message(400, "'from' parameter is missing")
    if not to or not all("@" in a for a in to):
        return _message(400, "to parameter is not a valid address. please check documentation")
    if form.get("template"):
        return _templated(form, to)
    if not (form.get("text") or form.get("html")):
        return _message(400, "Need at least one of 'text' or 'html' parameters specified")
    return taken(
        str(form["from"]),
        to,
        {"operation_id": form.get("v:operation_id")},
        str(form.get("subject") or ""),
        str(form.get("text") or ""),
        str(form.get("html") or ""),
    )


def _templated(form: Any, to: list[str]) -> Parsed:
    try:
        data = json.loads(str(form.get("t:variables") or "{}"))
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return _message(400, "t:variables must be a valid JSON object")
    tags = {"operation_id": form.get("v:operation_id")}
    subject = str(form.get("subject") or "")
    return taken_templated(str(form["from"]), to, tags, str(form["template"]), data, subject)


def accepted(message: Message) -> web.Response:
    return json_response(
        {"id": f"<{message.id}@sandbox.mailgun.test>", "message": "Queued. Thank you."}
    )


def throttled(sandbox: Sandbox, wait: float) -> web.Response:
    """Mailgun states the wait in its text, "… try again after <RFC 1123 date>" (as
    github.com/mailgun/mailgun-java/issues/50 shows it; the Responses page: "retry these
    requests as defined in the response"); the configured Retry-After form rides along."""
    at = formatdate(time.time() + max(1.0, wait), usegmt=True).replace("GMT", "UTC")
    text = f"Domain is not allowed to send: rate limit exceeded, try again after {at}"
    return _message(429, text, sandbox.retry_after.header(wait))


def events(request: web.Request, sandbox: Sandbox) -> web.Response:
    """The Events API as documented: filters event, begin, ascending and limit (at most 300);
    ``user-variables`` is no documented filter and is ignored, as Mailgun may ignore it
    (.../api-reference/send/mailgun/events lists the filter fields)."""
    limit = request.query.get("limit", "100")
    if not limit.isdigit() or not 0 < int(limit) <= 300:
        return _message(400, "limit must be 1..300")
    if request.query.get("event", "accepted") != "accepted":
        return json_response({"items": [], "paging": {}})
    try:
        begin = float(request.query.get("begin") or 0)
    except ValueError:
        return _message(400, "begin must be a Unix timestamp")
    ascending = request.query.get("ascending", "no") == "yes"
    sent = sorted(
        (m for m in sandbox.store.messages.values() if m.created_at >= begin),
        key=lambda m: m.created_at,
        reverse=not ascending,
    )
    items = [
        {
            "event": "accepted",
            "timestamp": m.created_at,
            "id": f"ev-{m.id}",
            "user-variables": {"operation_id": m.operation_id},
            "message": {"headers": {"message-id": f"{m.id}@sandbox.mailgun.test"}},
        }
        for m in sent[: int(limit)]
    ]
    return json_response({"items": items, "paging": {}})


# -- webhooks -----------------------------------------------------------------------------
# documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks (the
# signature block: timestamp, a 50-character token, hex HMAC-SHA256 of timestamp + token under
# the HTTP webhook signing key) and .../user-manual/events/ (event-data: event, severity of a
# failure, timestamp, message headers, user-variables). One event per POST; a 406 answer
# tells Mailgun not to retry (.../webhooks/webhooks, "Retry Schedule").
EVENT_NAMES = {
    ACCEPTED: ("accepted", None),
    "delivered": ("delivered", None),
    "bounced": ("failed", "permanent"),
    "deferred": ("failed", "temporary"),
    "complained": ("complained", None),
}


def _event_data(event: Event, message: Message) -> dict[str, Any]:
    name, severity = EVENT_NAMES[event.type]
    data: dict[str, Any] = {
        "event": name,
        "timestamp": event.occurred_at,
        "id": event.event_id,
        "recipient": message.body["to"][0],
        "message": {"headers": {"message-id": f"{message.id}@sandbox.mailgun.test"}},
        "user-variables": {"operation_id": message.operation_id},
    }
    if severity is not None:
        data["severity"] = severity
    return data


# documentation.mailgun.com/docs/mailgun/user-manual/webhooks/webhook-retries: any answer but
# 200 or 406 is retried "during 8 hours at the following exponential backoff intervals
# before stopping to try: 5 minutes, 10 minutes, 15 minutes, 1 hour, 2 hours, 4 hours".
RETRIES = (300.0, 600.0, 900.0, 3600.0, 7200.0, 14400.0)


def retried(body: bytes) -> bool:
    """documentation.mailgun.com/docs/mailgun/user-manual/webhooks/webhook-retries: a failed
    POST is retried "for Webhooks other than the delivery notification"."""
    try:
        event = json.loads(body).get("event-data", {}).get("event")
    except (ValueError, AttributeError):
        return True
    return bool(event != "delivered")


def webhook_posts(signing: Signing, due: list[Pending]) -> list[Post]:
    key = signing.settings.webhook_signing_key.get_secret_value().encode()
    posts = []
    for event, message in due:
        stamp, token = str(int(time.time())), secrets.token_hex(25)
        signature = hmac.new(key, (stamp + token).encode(), hashlib.sha256).hexdigest()
        body = {
            "signature": {"timestamp": stamp, "token": token, "signature": signature},
            "event-data": _event_data(event, message),
        }
        posts.append((json.dumps(body).encode(), {"Content-Type": "application/json"}))
    return posts


DIALECT = Dialect(
    send_path=f"/v3/{DOMAIN}/messages",
    authorized=authorized,
    parse=parse,
    accepted=accepted,
    unauthorized=lambda: web.Response(status=401, text="Forbidden"),
    throttled=throttled,
    failed=lambda status: _message(status, "Internal Server Error"),
    rejected=lambda: _message(
        400, "to parameter is not a valid address. please check documentation"
    ),
    lookup_path=f"/v3/{DOMAIN}/events",
    lookup=events,
    hook=Hook(webhook_posts, RETRIES, acceptance=True, final=frozenset({406}), retried=retried),
    refusals={name: _refusal(name) for name in (*REFUSALS, "wrong_base_url")},
)

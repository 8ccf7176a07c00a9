"""Postmark as documented: https://postmarkapp.com/developer/api/email-api (``POST /email``,
X-Postmark-Server-Token, 200 ``{"To","SubmittedAt","MessageID","ErrorCode":0,
"Message":"OK"}``), https://postmarkapp.com/developer/api/overview (401; 422 with
ErrorCode 300 invalid request, 406 inactive recipient; 429; 500) and
https://postmarkapp.com/support/article/1180-what-does-errorcode-300-mean (punctuation
in an unquoted From name: ErrorCode 300),
https://postmarkapp.com/developer/api/messages-api (``GET /messages/outbound`` with
``metadata_<key>=`` filters, ``{"TotalCount", "Messages": [...]}``) and
https://postmarkapp.com/developer/api/templates-api (``POST /email/withTemplate`` with
``TemplateId`` or ``TemplateAlias`` and a ``TemplateModel`` object; a template the server
lacks: 422, ErrorCode 1101 "Template ID invalid or not found")."""

from __future__ import annotations

import base64
import hmac
import json
import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote, urlsplit

from aiohttp import web

from services.sandbox.modes import Dialect, Parsed, by_operation, taken, taken_templated
from services.sandbox.responses import json_response, read_json
from services.sandbox.state import Sandbox
from services.sandbox.store import Event, Message, rfc3339
from services.sandbox.webhooks import Hook, Pending, Post, Signing


def _error(status: int, code: int, message: str) -> web.Response:
    return json_response({"ErrorCode": code, "Message": message}, status)


async def _forbidden(_request: web.Request) -> web.Response:
    """A 403 from Postmark's network layer, in front of the API: no ``ErrorCode`` body."""
    return web.Response(
        status=403,
        text="<html><body><h1>403 Forbidden</h1></body></html>",
        content_type="text/html",
    )


async def _from_not_signature(request: web.Request) -> web.Response:
    """422 ErrorCode 300 naming the From, as postmarkapp.com/support/article/
    troubleshooting-422-unprocessable-entity-errors shows it."""
    body = await read_json(request, 256 * 1024)
    sender = str(body.get("From") or "") if isinstance(body, dict) else ""
    return _error(
        422, 300, f"Invalid 'From' address: '{sender}' is not a verified sender signature."
    )


async def _not_found(_request: web.Request) -> web.Response:
    """404 (postmarkapp.com/developer/api/overview: "ensure the endpoint … are correct"), as a
    base URL with a wrong path gets it."""
    return _error(
        404, 0, "Not found: ensure the endpoint and the request's identifiers are correct."
    )


async def _undocumented(_request: web.Request) -> web.Response:
    return _error(422, 9001, "Sandbox: refused by a rule no documentation names")


def authorized(request: web.Request, key: str) -> bool:
    given = request.headers.get("X-Postmark-Server-Token", "").encode()
    return hmac.compare_digest(given, key.encode())


async def _read(
    request: web.Request, limit: int
) -> tuple[dict[str, Any], list[str]] | web.Response:
    body = await read_json(request, limit)
    if isinstance(body, web.Response):
        return (
            _error(413, 0, "Payload too large")
            if body.status == 413
            else _error(422, 402, "Invalid JSON")
        )
    if not isinstance(body, dict):
        return _error(422, 403, "Incompatible JSON")
    to = [a.strip() for a in str(body.get("To") or "").split(",") if a.strip()]
    if not to or len(to) > 50 or not all("@" in a for a in to):
        return _error(422, 300, "Invalid 'To' address.")
    if not body.get("From"):
        return _error(422, 300, "Invalid 'From' address.")
    if unquoted_punctuation(str(body["From"])):
        return _error(422, 300, "Error parsing 'From': Illegal email address.")
    return body, to


# postmarkapp.com/support/article/1180-what-does-errorcode-300-mean: "If an email address has
# a special character or punctuation, the name field needs to be quote escaped", else
# ErrorCode 300 ("Illegal email address").
_PUNCTUATION = frozenset('()<>[]:;@\\,."')


def unquoted_punctuation(text: str) -> bool:
    """True for a From whose display name carries punctuation outside quotes."""
    name, bracket, _ = text.partition("<")
    name = name.strip()
    if not bracket or not name or (name.startswith('"') and name.endswith('"')):
        return False
    return any(c in _PUNCTUATION for c in name)


def _operation(body: dict[str, Any]) -> dict[str, Any]:
    raw = body.get("Metadata")
    return {"operation_id": (raw if isinstance(raw, dict) else {}).get("operation_id")}


async def parse_templated(request: web.Request, limit: int) -> Parsed:
    read = await _read(request, limit)
    if isinstance(read, web.Response):
        return read
    body, to = read
    name = body.get("TemplateAlias") or body.get("TemplateId")
    if not name or not isinstance(body.get("TemplateModel"), dict):
        return _error(422, 1109, "TemplateAlias or TemplateId, and a TemplateModel, are required.")
    model = body["TemplateModel"]
    return taken_templated(str(body["From"]), to, _operation(body), str(name), model)


async def parse(request: web.Request, limit: int) -> Parsed:
    read = await _read(request, limit)
    if isinstance(read, web.Response):
        return read
    body, to = read
    if not (body.get("TextBody") or body.get("HtmlBody")):
        return _error(422, 300, "Provide either email TextBody or HtmlBody or both.")
    return taken(
        str(body["From"]),
        to,
        _operation(body),
        str(body.get("Subject") or ""),
        str(body.get("TextBody") or ""),
        str(body.get("HtmlBody") or ""),
    )


def accepted(message: Message) -> web.Response:
    submitted = datetime.fromtimestamp(message.created_at, UTC).isoformat()
    return json_response(
        {
            "To": ", ".join(message.body["to"]),
            "SubmittedAt": submitted,
            "MessageID": message.id,
            "ErrorCode": 0,
            "Message": "OK",
        }
    )


def search(request: web.Request, sandbox: Sandbox) -> web.Response:
    count, offset = request.query.get("count", ""), request.query.get("offset", "")
    if not count.isdigit() or not offset.isdigit() or not 0 < int(count) <= 500:
        return _error(422, 0, "count (1..500) and offset are required")
    operation_id = request.query.get("metadata_operation_id", "")
    sandbox.store.materialize()
    # Postmark documents no delay after which a send appears in the search: the sandbox's
    # is configurable (search_delay_seconds), so a lookup that trusts "not found" shows.
    indexed = time.time() - sandbox.settings.search_delay_seconds
    found = [
        m
        for m in (by_operation(sandbox, operation_id) if operation_id else [])
        if m.created_at <= indexed
    ]
    rows = [
        {
            "MessageID": m.id,
            "Recipients": m.body["to"],
            "Status": "Sent",
            "ReceivedAt": rfc3339(m.created_at),
            "Metadata": {"operation_id": m.operation_id},
        }
        for m in found[int(offset) : int(offset) + int(count)]
    ]
    return json_response({"TotalCount": len(found), "Messages": rows})


# -- webhooks -----------------------------------------------------------------------------
# postmarkapp.com/developer/webhooks/delivery-webhook, /bounce-webhook and
# /spam-complaint-webhook (one record per POST; MessageID, Metadata, DeliveredAt/BouncedAt);
# the basic-auth credentials come from the webhook URL, as
# postmarkapp.com/developer/webhooks/webhooks-overview shows them. No acceptance event.
BOUNCES = {
    "bounced": ("HardBounce", 1),
    "deferred": ("Transient", 2),
    "complained": ("SpamComplaint", 512),
}


# Postmark's developer pages (webhooks-overview and each webhook's page) give no retry
# schedule for outbound webhooks; Postmark's own integration guide does
# (github.com/ActiveCampaign/postmark-skills, postmark-webhooks/SKILL.md, "Retries and
# Failure Handling"): the same ladder for every outbound type, 3 retries 1, 5 and 15 min
# apart, then 6 more 1, 5, 10, 10, 10 and 15 min apart (9 in ~72 min); only a 5xx, 408,
# 429 or no answer is retried, "every other 4xx is permanent". (The 10 retries over ~10.5 h
# of postmarkapp.com/support/article/understanding-inbound-webhook-retries-in-postmark are
# the inbound webhook's.)
RETRIES = tuple(60.0 * m for m in (1, 5, 15, 1, 5, 10, 10, 10, 15))
FINAL = frozenset(range(400, 500)) - {408, 429}


def _record(event: Event, message: Message) -> dict[str, Any]:
    at = rfc3339(event.occurred_at)
    record: dict[str, Any] = {
        "MessageID": message.id,
        "MessageStream": "outbound",
        "Metadata": {"operation_id": message.operation_id},
    }
    if event.type == "delivered":
        return {
            **record,
            "RecordType": "Delivery",
            "Recipient": message.body["to"][0],
            "DeliveredAt": at,
            "Details": "sandbox delivery",
        }
    kind, code = BOUNCES[event.type]
    return {
        **record,
        "RecordType": "SpamComplaint" if kind == "SpamComplaint" else "Bounce",
        "Type": kind,
        "TypeCode": code,
        "Email": message.body["to"][0],
        "BouncedAt": at,
        "Description": "sandbox bounce",
        "Inactive": kind != "Transient",
    }


def _credentials(url: str) -> dict[str, str]:
    parts = urlsplit(url)
    if parts.username is None:
        return {}
    pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
    return {"Authorization": "Basic " + base64.b64encode(pair.encode()).decode()}


def webhook_posts(signing: Signing, due: list[Pending]) -> list[Post]:
    headers = {"Content-Type": "application/json", **_credentials(signing.settings.webhook_url)}
    return [(json.dumps(_record(e, m)).encode(), headers) for e, m in due]


DIALECT = Dialect(
    send_path="/email",
    authorized=authorized,
    parse=parse,
    accepted=accepted,
    unauthorized=lambda: _error(401, 10, "Bad or missing API token"),
    throttled=lambda _sandbox, _wait: _error(429, 429, "Rate limit exceeded"),
    failed=lambda status: _error(status, 0, "Internal server error"),
    rejected=lambda: _error(
        422, 406, "You tried to send to recipient(s) that have been marked as inactive."
    ),
    lookup_path="/messages/outbound",
    lookup=search,
    hook=Hook(webhook_posts, RETRIES, final=FINAL),
    refusals={
        "forbidden": _forbidden,
        "undocumented": _undocumented,
        "from_not_signature": _from_not_signature,
        "not_found": _not_found,
    },
    template_path="/email/withTemplate",
    template_parse=parse_templated,
    missing_template=lambda _name: _error(422, 1101, "Template ID invalid or not found"),
)

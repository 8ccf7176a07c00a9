"""Postmark as documented: https://postmarkapp.com/developer/api/email-api (``POST /email``,
X-Postmark-Server-Token, 200 ``{"To","SubmittedAt","MessageID","ErrorCode":0,
"Message":"OK"}``), https://postmarkapp.com/developer/api/overview (401; 422 with
ErrorCode 300 invalid request, 406 inactive recipient; 429; 500) and
https://postmarkapp.com/developer/api/messages-api (``GET /messages/outbound`` with
``metadata_<key>=`` filters, ``{"TotalCount", "Messages": [...]}``)."""

from __future__ import annotations

import hmac
from datetime import UTC, datetime

from aiohttp import web

from services.sandbox.modes import Dialect, Parsed, by_operation
from services.sandbox.responses import json_response, read_json
from services.sandbox.state import Sandbox
from services.sandbox.store import Message, rfc3339


def _error(status: int, code: int, message: str) -> web.Response:
    return json_response({"ErrorCode": code, "Message": message}, status)


def authorized(request: web.Request, key: str) -> bool:
    given = request.headers.get("X-Postmark-Server-Token", "").encode()
    return hmac.compare_digest(given, key.encode())


async def parse(request: web.Request, limit: int) -> Parsed:
    body = await read_json(request, limit)
    if isinstance(body, web.Response):
        return _error(413, 0, "Payload too large") if body.status == 413 else _error(
            422, 402, "Invalid JSON")  # fmt: skip
    if not isinstance(body, dict):
        return _error(422, 403, "Incompatible JSON")
    to = [a.strip() for a in str(body.get("To") or "").split(",") if a.strip()]
    if not to or len(to) > 50 or not all("@" in a for a in to):
        return _error(422, 300, "Invalid 'To' address.")
    if not body.get("From") or not (body.get("TextBody") or body.get("HtmlBody")):
        return _error(422, 300, "Provide either email TextBody or HtmlBody or both.")
    raw = body.get("Metadata")
    metadata = raw if isinstance(raw, dict) else {}
    return {"from": str(body["From"]), "to": to, "subject": str(body.get("Subject") or ""),
            "text": str(body.get("TextBody") or ""), "html": str(body.get("HtmlBody") or ""),
            "tags": {"operation_id": metadata.get("operation_id")}}  # fmt: skip


def accepted(message: Message) -> web.Response:
    submitted = datetime.fromtimestamp(message.created_at, UTC).isoformat()
    return json_response({"To": ", ".join(message.body["to"]), "SubmittedAt": submitted,
                          "MessageID": message.id, "ErrorCode": 0, "Message": "OK"})  # fmt: skip


def search(request: web.Request, sandbox: Sandbox) -> web.Response:
    count, offset = request.query.get("count", ""), request.query.get("offset", "")
    if not count.isdigit() or not offset.isdigit() or not 0 < int(count) <= 500:
        return _error(422, 0, "count (1..500) and offset are required")
    operation_id = request.query.get("metadata_operation_id", "")
    sandbox.store.materialize()
    found = by_operation(sandbox, operation_id) if operation_id else []
    rows = [{"MessageID": m.id, "Recipients": m.body["to"], "Status": "Sent",
             "ReceivedAt": rfc3339(m.created_at), "Metadata": {"operation_id": m.operation_id}}
            for m in found[int(offset):int(offset) + int(count)]]  # fmt: skip
    return json_response({"TotalCount": len(found), "Messages": rows})


DIALECT = Dialect(
    send_path="/email",
    authorized=authorized,
    parse=parse,
    accepted=accepted,
    unauthorized=lambda: _error(401, 10, "Bad or missing API token"),
    throttled=lambda _sandbox, _wait: _error(429, 429, "Rate limit exceeded"),
    failed=lambda status: _error(status, 0, "Internal server error"),
    rejected=lambda: _error(422, 406, "You tried to send to recipient(s) that have been "
                            "marked as inactive."),
    lookup_path="/messages/outbound",
    lookup=search,
)

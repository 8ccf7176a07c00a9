"""SendGrid v3 Mail Send as documented:
https://www.twilio.com/docs/sendgrid/api-reference/mail-send/mail-send (202, X-Message-Id,
custom_args), .../how-to-use-the-sendgrid-v3-api/errors (``{"errors": [{"field",
"message"}]}``; 401, 403, 413, 429, 500) and .../rate-limits (X-RateLimit-Limit,
-Remaining, -Reset as an epoch; no Retry-After). Dynamic templates: ``template_id`` with
``dynamic_template_data`` per personalization, no subject or content needed
(.../ui/sending-email/how-to-send-an-email-with-dynamic-templates); an id the account lacks
is still answered 202 (sendgrid/sendgrid-go#255), so no missing-template answer here."""

from __future__ import annotations

import base64
import hmac
import time
from email.utils import formataddr
from typing import Any

import orjson
from aiohttp import web
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from services.sandbox.modes import Dialect, Parsed, taken, taken_templated
from services.sandbox.ratelimit import FixedWindow
from services.sandbox.responses import SANDBOX, json_response, read_json
from services.sandbox.state import Sandbox
from services.sandbox.store import Event, Message
from services.sandbox.webhooks import (
    ACCEPTED,
    MAX_BATCH,
    WEBHOOKS,
    Hook,
    Pending,
    Post,
    Signing,
    exponential,
)


def _errors(
    status: int, message: str, field: str | None = None, headers: dict[str, str] | None = None
) -> web.Response:
    return json_response({"errors": [{"field": field, "message": message}]}, status, headers)


async def _sender_not_verified(_request: web.Request) -> web.Response:
    """403 on .../how-to-use-the-sendgrid-v3-api/responses: no verified Sender Identity."""
    return _errors(
        403,
        "The from address does not match a verified Sender Identity. Mail "
        "cannot be sent until this error is resolved.",
        "from",
    )


async def _undocumented(_request: web.Request) -> web.Response:
    return _errors(400, "Sandbox: refused by a rule no documentation names")


def authorized(request: web.Request, key: str) -> bool:
    given = request.headers.get("Authorization", "").encode()
    return hmac.compare_digest(given, f"Bearer {key}".encode())


def _addresses(body: dict[str, Any]) -> list[str] | None:
    try:
        return [str(to["email"]) for p in body["personalizations"] for to in p["to"]]
    except (KeyError, TypeError):
        return None


def _content(body: dict[str, Any], kind: str) -> str:
    for part in body.get("content") or []:
        if isinstance(part, dict) and part.get("type") == kind:
            return str(part.get("value", ""))
    return ""


async def parse(request: web.Request, limit: int) -> Parsed:
    body = await read_json(request, limit)
    if isinstance(body, web.Response):
        return _errors(413, "payload too large") if body.status == 413 else _errors(400, "bad json")
    to = _addresses(body) if isinstance(body, dict) else None
    if not to or not all("@" in a for a in to):
        return _errors(400, "Does not contain a valid address.", "personalizations.0.to.0.email")
    if not isinstance(body.get("from"), dict):
        return _errors(400, "The from object must be provided for every email send.", "from")
    if "@" not in str(body["from"].get("email") or ""):
        # The Mail Send page: from.email is "the email address from which messages are sent".
        return _errors(400, "The from email does not contain a valid address.", "from.email")
    if body.get("template_id"):
        return _templated(body, to)
    if not body.get("subject") or not body.get("content"):
        return _errors(400, "The subject and content parameters are required.", "content")
    return taken(
        _sender(body["from"]),
        to,
        _operation(body),
        body["subject"],
        _content(body, "text/plain"),
        _content(body, "text/html"),
    )


def _sender(given: dict[str, Any]) -> str:
    """The ``from`` object (``{"email", "name"}``) as the From header SendGrid writes."""
    return formataddr((str(given.get("name") or ""), str(given["email"])))


def _operation(body: dict[str, Any]) -> dict[str, Any]:
    raw = body.get("custom_args")
    return {"operation_id": (raw if isinstance(raw, dict) else {}).get("operation_id")}


def _templated(body: dict[str, Any], to: list[str]) -> Parsed:
    data = body["personalizations"][0].get("dynamic_template_data")
    if not isinstance(data, dict):
        return _errors(
            400,
            "dynamic_template_data must be an object.",
            "personalizations.0.dynamic_template_data",
        )
    return taken_templated(
        _sender(body["from"]), to, _operation(body), str(body["template_id"]), data
    )


def _limits(sandbox: Sandbox) -> dict[str, str]:
    """The refresh period's figures: in this mode the send bucket is a FixedWindow."""
    bucket = getattr(sandbox.send_bucket, "inner", sandbox.send_bucket)  # under a Blackout
    assert isinstance(bucket, FixedWindow), "state._send_bucket builds one for sendgrid"
    return {
        "X-RateLimit-Limit": str(bucket.limit),
        "X-RateLimit-Remaining": str(bucket.remaining),
        "X-RateLimit-Reset": str(bucket.reset),
    }


def accepted(message: Message) -> web.Response:
    return web.Response(status=202, headers={"X-Message-Id": message.id})


def throttled(sandbox: Sandbox, wait: float) -> web.Response:
    del wait  # the period's end says when, in whole epoch seconds
    return _errors(429, "too many requests", headers=_limits(sandbox))


# -- Event Webhook ------------------------------------------------------------------------
# twilio.com/docs/sendgrid/for-developers/tracking-events/event (the events, custom args at
# the top level of each), .../getting-started-event-webhook-security-features (ECDSA P-256
# over timestamp + body, base64 in X-Twilio-Email-Event-Webhook-Signature) and
# api-reference/webhooks/get-signed-event-webhooks-public-key (the public key, base64 DER).
EVENT_NAMES = {
    ACCEPTED: "processed",
    "delivered": "delivered",
    "bounced": "bounce",
    "complained": "spamreport",
    "deferred": "deferred",
}


# twilio.com/docs/sendgrid/for-developers/tracking-events/troubleshooting: any answer but a 2xx
# is retried "until we receive a 2xx response or the maximum time has expired. All events
# are retried at increasing intervals for up to 24 hours after the event occurs." The
# intervals are not documented: doubling from 1 minute (an assumption), the last retry at
# 24 h (11 retries).
RETRIES = exponential(60.0, 24 * 3600.0)


def _event(event: Event, message: Message) -> dict[str, Any]:
    row: dict[str, Any] = {
        "email": message.body["to"][0],
        "timestamp": int(event.occurred_at),
        "event": EVENT_NAMES[event.type],
        "smtp-id": f"<{message.id}@sandbox.sendgrid.test>",
        "sg_event_id": event.event_id,
        "sg_message_id": f"{message.id}.sandbox-filter-0",
        "operation_id": message.operation_id,
    }
    if event.type == "bounced":
        row.update(type="bounce", reason="550 5.1.1 unknown user", status="5.1.1")
    elif event.type == "deferred":
        row.update(response="421 try again later", attempt="1")
    return row


def webhook_posts(signing: Signing, due: list[Pending]) -> list[Post]:
    posts = []
    for start in range(0, len(due), MAX_BATCH):
        body = orjson.dumps([_event(e, m) for e, m in due[start : start + MAX_BATCH]])
        stamp = str(int(time.time()))
        signature = signing.ecdsa.sign(stamp.encode() + body, ec.ECDSA(hashes.SHA256()))
        posts.append(
            (
                body,
                {
                    "Content-Type": "application/json",
                    "X-Twilio-Email-Event-Webhook-Signature": base64.b64encode(signature).decode(),
                    "X-Twilio-Email-Event-Webhook-Timestamp": stamp,
                },
            )
        )
    return posts


async def public_key(request: web.Request) -> web.Response:
    """``GET /v3/user/webhooks/event/settings/signed/{id}``: the key the receiver verifies with."""
    if not authorized(request, request.app[SANDBOX].settings.api_key.get_secret_value()):
        return DIALECT.unauthorized()
    der = (
        request.app[WEBHOOKS]
        .signing.ecdsa.public_key()
        .public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return json_response(
        {"id": request.match_info["id"], "public_key": base64.b64encode(der).decode()}
    )


DIALECT = Dialect(
    send_path="/v3/mail/send",
    authorized=authorized,
    parse=parse,
    accepted=accepted,
    unauthorized=lambda: _errors(
        401, "The provided authorization grant is invalid, expired, or revoked"
    ),
    throttled=throttled,
    rate_headers=_limits,
    failed=lambda status: _errors(status, "internal server error"),
    rejected=lambda: _errors(
        400, "Does not contain a valid address.", "personalizations.0.to.0.email"
    ),
    hook=Hook(webhook_posts, RETRIES, acceptance=True),
    routes=(("GET", "/v3/user/webhooks/event/settings/signed/{id}", public_key),),
    refusals={"sender_not_verified": _sender_not_verified, "undocumented": _undocumented},
)

"""SendGrid Event Webhook: a signed JSON array of events.

Signature (twilio.com/docs/sendgrid/for-developers/tracking-events/
getting-started-event-webhook-security-features): ECDSA P-256 / SHA-256, base64 DER in
``X-Twilio-Email-Event-Webhook-Signature``, over
``X-Twilio-Email-Event-Webhook-Timestamp`` followed by the raw body, checked with the
account's verification key (base64 DER SubjectPublicKeyInfo, as the console shows it).
Events (twilio.com/docs/sendgrid/for-developers/tracking-events/event): ``event``,
``timestamp`` (Unix seconds), ``sg_message_id`` (the send's ``X-Message-Id``, then ``.`` and
a filter suffix), and every custom arg at the top level, ours being ``operation_id``.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from aiohttp import web
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from services.poller.inbound import events
from services.poller.inbound.sources import Source
from services.poller.settings import PollerSettings
from shared import clock
from shared.model import Delivery
from shared.providers.sendgrid import KIND, SendGridInbound, public_key
from shared.redis import RedisClient

SIGNATURE_HEADER = "X-Twilio-Email-Event-Webhook-Signature"
TIMESTAMP_HEADER = "X-Twilio-Email-Event-Webhook-Timestamp"

# SendGrid's event vocabulary -> resetgate's. A bounce's ``type`` refines it: "blocked" is
# the receiving server refusing the message (not the address), which SendGrid does not retry.
TABLE: dict[str, events.Meaning] = {
    "processed": events.Acceptance.ACCEPTED,
    "deferred": Delivery.DEFERRED,
    "delivered": Delivery.DELIVERED,
    "bounce": Delivery.BOUNCED,
    "bounce/blocked": Delivery.REJECTED,
    "dropped": Delivery.REJECTED,
    "spamreport": Delivery.COMPLAINED,
    "open": None,
    "click": None,
    "unsubscribe": None,
    "group_unsubscribe": None,
    "group_resubscribe": None,
}


def verify(
    key: ec.EllipticCurvePublicKey, signature: str | None, timestamp: str | None, body: bytes
) -> None:
    """Raise 401 unless ``signature`` is SendGrid's over ``timestamp + body``."""
    if not signature or not timestamp:
        raise events.unauthorized(f"{SIGNATURE_HEADER} and {TIMESTAMP_HEADER} are required")
    try:
        der = base64.b64decode(signature, validate=True)
        key.verify(der, timestamp.encode() + body, ec.ECDSA(hashes.SHA256()))
    except (binascii.Error, ValueError, InvalidSignature):
        raise events.unauthorized("the signature does not verify") from None


def message_id(sg_message_id: Any) -> Any:
    """``<X-Message-Id>.filter…`` -> the X-Message-Id the send answered with."""
    return sg_message_id.split(".", 1)[0] if isinstance(sg_message_id, str) else None


def parse(body: bytes) -> events.Parsed:
    rows = events.json_body(body)
    if not isinstance(rows, list):
        raise events.bad_request("the body must be a JSON array of events")
    parsed = events.Parsed()
    for row in rows:
        _one(parsed, row)
    return parsed


def _one(parsed: events.Parsed, row: Any) -> None:
    if not isinstance(row, dict) or not isinstance(row.get("event"), str):
        parsed.drop(events.Drop.MALFORMED)
        return
    kind = row["event"]
    if kind == "bounce" and row.get("type") == "blocked":
        kind = "bounce/blocked"
    if kind not in TABLE:
        parsed.drop(events.Drop.UNKNOWN_TYPE)
        return
    ids = (row.get(events.OPERATION_ID_FIELD), message_id(row.get("sg_message_id")))
    occurred = events.epoch_ms(row.get("timestamp"))
    events.add_event(parsed, KIND.name, kind, TABLE[kind], ids, occurred)


def receiver(source: Source, settings: PollerSettings, _client: RedisClient) -> events.Receive:
    key = public_key(source.own(SendGridInbound).sendgrid_webhook_public_key)

    async def receive(request: web.Request, body: bytes) -> events.Receipt:
        timestamp = request.headers.get(TIMESTAMP_HEADER)
        verify(key, request.headers.get(SIGNATURE_HEADER), timestamp, body)
        events.check_fresh(timestamp, settings.webhook_max_age_seconds, clock.now_ms())
        return events.Receipt(parse(body))

    return receive

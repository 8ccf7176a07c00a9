"""Mailgun webhooks: one JSON event per request, signed inside the body.

Signature (documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks):
``signature: {timestamp, token, signature}``; ``signature`` is the hex HMAC-SHA256 of
timestamp + token under the webhook signing key. A token is never honoured twice (the
caller remembers it in Redis) and the timestamp must be recent.
Events (documentation.mailgun.com/docs/mailgun/user-manual/events/): ``event-data`` holds
``event``, ``severity`` for ``failed``, ``timestamp`` (Unix seconds, fractional),
``message.headers.message-id`` and ``user-variables``, ours being ``operation_id``.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from services.poller.inbound import events
from services.poller.inbound.sources import Source
from services.poller.settings import PollerSettings
from shared import clock, keys
from shared.model import Delivery
from shared.providers.mailgun import KIND, MailgunInbound, bare
from shared.redis import RedisClient

# documentation.mailgun.com/docs/mailgun/user-manual/webhooks/webhook-retries: a POST not
# answered 200 or 406 is retried after 5 min, 10 min, 15 min, 1 h, 2 h and 4 h ("during 8
# hours") with the signature first made; "delivered" is never retried.
RETRY_HORIZON_SECONDS = 8 * 3600

# Mailgun's event vocabulary -> resetgate's; ``failed`` is refined by its severity.
TABLE: dict[str, events.Meaning] = {
    "accepted": events.Acceptance.ACCEPTED,
    "delivered": Delivery.DELIVERED,
    "failed/temporary": Delivery.DEFERRED,
    "failed/permanent": Delivery.BOUNCED,
    "rejected": Delivery.REJECTED,
    "complained": Delivery.COMPLAINED,
    "opened": None,
    "clicked": None,
    "unsubscribed": None,
    "stored": None,
}


@dataclass(frozen=True, slots=True)
class Signed:
    timestamp: str
    token: str
    signature: str
    event: dict[str, Any]


def decode(body: bytes) -> Signed:
    """The body's signature block and event, or 400."""
    document = events.json_body(body)
    signature = document.get("signature") if isinstance(document, dict) else None
    if not isinstance(signature, dict):
        raise events.unauthorized("the body carries no signature block")
    parts = [signature.get(name) for name in ("timestamp", "token", "signature")]
    if not all(isinstance(part, str) and 0 < len(part) <= 256 for part in parts):
        raise events.unauthorized(
            "the signature block needs timestamp, token and signature strings"
        )
    event = document.get("event-data")
    if not isinstance(event, dict):
        raise events.bad_request("the body carries no event-data object")
    timestamp, token, given = (str(part) for part in parts)
    if not (timestamp.isascii() and timestamp.isdigit()):
        # The signature covers timestamp + token run together: a timestamp that took some of
        # the token ("1733000000e0" still reads as a number) would make a fresh token of the
        # rest, past the replay guard, under the same signature.
        raise events.unauthorized("the signed timestamp must be Unix seconds in ASCII digits")
    return Signed(timestamp, token, given, event)


def verify(key: bytes, signed: Signed) -> None:
    """Raise 401 unless the HMAC over timestamp + token matches."""
    expected = hmac.new(key, (signed.timestamp + signed.token).encode(), hashlib.sha256)
    given = signed.signature.lower().encode()  # bytes: a non-ASCII str would raise, not fail
    if not hmac.compare_digest(expected.hexdigest().encode(), given):
        raise events.unauthorized("the signature does not verify")


def token_digest(signed: Signed) -> str:
    """What the replay guard remembers: a digest, so no provider token sits in a key name."""
    return hashlib.sha256(signed.token.encode()).hexdigest()


def message_id(event: dict[str, Any]) -> Any:
    """The Message-Id header, kept as the sender keeps the send's answer (``bare``)."""
    message = event.get("message")
    headers = message.get("headers") if isinstance(message, dict) else None
    value = headers.get("message-id") if isinstance(headers, dict) else None
    return bare(value) if isinstance(value, str) else None


def parse(event: dict[str, Any]) -> events.Parsed:
    parsed = events.Parsed()
    kind = event.get("event")
    if not isinstance(kind, str):
        parsed.drop(events.Drop.MALFORMED)
        return parsed
    if kind == "failed":
        kind = f"failed/{event.get('severity')}"
    if kind not in TABLE:
        parsed.drop(events.Drop.UNKNOWN_TYPE)
        return parsed
    variables = event.get("user-variables")
    operation_id = variables.get(events.OPERATION_ID_FIELD) if isinstance(variables, dict) else None
    ids = (operation_id, message_id(event))
    occurred = events.epoch_ms(event.get("timestamp"))
    events.add_event(parsed, KIND.name, kind, TABLE[kind], ids, occurred)
    return parsed


def receiver(source: Source, settings: PollerSettings, client: RedisClient) -> events.Receive:
    key = source.own(MailgunInbound).mailgun_webhook_signing_key.get_secret_value().encode()
    # Outlives every timestamp still accepted: a token is refused for as long as its
    # signature would otherwise be believed.
    ttl = max(settings.webhook_max_age_seconds, RETRY_HORIZON_SECONDS) * 2

    async def receive(_: web.Request, body: bytes) -> events.Receipt:
        signed = decode(body)
        verify(key, signed)
        events.check_fresh(
            signed.timestamp,
            settings.webhook_max_age_seconds,
            clock.now_ms(),
            RETRY_HORIZON_SECONDS,
        )
        replay_key = keys.webhook_token(KIND.name, token_digest(signed))
        if not await client.set(replay_key, "1", nx=True, ex=ttl):
            # Mailgun does not retry a 406: a replayed token is refused for good.
            raise events.Rejected(406, "replayed", "this signature token was already used")
        return events.Receipt(parse(signed.event), replay_key)

    return receive

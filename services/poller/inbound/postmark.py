"""Postmark webhooks: delivery, bounce and spam complaint, one JSON record per request.

Postmark signs nothing; it sends the basic-auth credentials written into the webhook URL
(``https://user:password@host/webhooks/postmark``,
postmarkapp.com/developer/webhooks/webhooks-overview), compared here in constant time,
optionally with an allow-list of source networks
(postmarkapp.com/support/article/800-ips-for-firewalls).
Records: postmarkapp.com/developer/webhooks/delivery-webhook (``DeliveredAt``),
/bounce-webhook and /spam-complaint-webhook (``BouncedAt``, ``Type``); ``MessageID`` and
``Metadata``, ours being ``operation_id``. Bounce types: postmarkapp.com/developer/api/bounce-api.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import ipaddress
from collections.abc import Sequence

from aiohttp import web

from services.poller.inbound import events
from services.poller.inbound.sources import Source
from services.poller.settings import PollerSettings
from shared.model import Delivery
from shared.providers.postmark import KIND, Network, PostmarkInbound, networks
from shared.redis import RedisClient

# Postmark's RecordType (and, for bounces, Type) -> resetgate's.
TABLE: dict[str, events.Meaning] = {
    "Delivery": Delivery.DELIVERED,
    "SpamComplaint": Delivery.COMPLAINED,
    "Bounce/HardBounce": Delivery.BOUNCED,
    "Bounce/BadEmailAddress": Delivery.BOUNCED,
    "Bounce/Transient": Delivery.DEFERRED,
    "Bounce/SoftBounce": Delivery.DEFERRED,
    "Bounce/DnsError": Delivery.DEFERRED,
    "Bounce/SpamComplaint": Delivery.COMPLAINED,
    "Bounce/SpamNotification": Delivery.REJECTED,
    "Bounce/VirusNotification": Delivery.REJECTED,
    "Bounce/ManuallyDeactivated": Delivery.REJECTED,
    "Bounce/Blocked": Delivery.REJECTED,
    "Bounce/SMTPApiError": Delivery.REJECTED,
    "Bounce/DMARCPolicy": Delivery.REJECTED,
    "Bounce/TemplateRenderingFailed": Delivery.REJECTED,
    "Bounce/AutoResponder": None,
    "Bounce/AddressChange": None,
    "Bounce/Unsubscribe": None,
    "Bounce/Subscribe": None,
    "Bounce/ChallengeVerification": None,
    "Bounce/OpenRelayTest": None,
    "Bounce/Unconfirmed": None,
    "Bounce/InboundError": None,
    "Bounce/Unknown": None,
    "Open": None,
    "Click": None,
    "SubscriptionChange": None,
}
WHEN = {"Delivery": "DeliveredAt", "Bounce": "BouncedAt", "SpamComplaint": "BouncedAt"}


def check_source(peer: str | None, allowed: Sequence[Network]) -> None:
    """403 unless the TCP peer is inside one of ``allowed`` (empty: anyone)."""
    if not allowed:
        return
    try:
        address = ipaddress.ip_address((peer or "").strip("[]"))
    except ValueError:
        address = None
    if address is None or not any(address in network for network in allowed):
        raise events.Rejected(403, "forbidden", "this source network may not post Postmark events")


def check_credentials(header: str | None, expected: bytes) -> None:
    """401 unless the Basic credentials equal ``user:password``, compared in constant time."""
    scheme, _, encoded = (header or "").partition(" ")
    try:
        given = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        given = b""
    if scheme.lower() != "basic" or not hmac.compare_digest(given, expected):
        raise events.unauthorized("basic-auth credentials are missing or wrong")


def parse(body: bytes) -> events.Parsed:
    record = events.json_body(body)
    if not isinstance(record, dict):
        raise events.bad_request("the body must be one JSON record")
    parsed = events.Parsed()
    kind = record.get("RecordType")
    if kind == "Bounce":
        kind = f"Bounce/{record.get('Type')}"
    if not isinstance(kind, str) or kind not in TABLE:
        parsed.drop(events.Drop.UNKNOWN_TYPE if isinstance(kind, str) else events.Drop.MALFORMED)
        return parsed
    metadata = record.get("Metadata")
    operation_id = metadata.get(events.OPERATION_ID_FIELD) if isinstance(metadata, dict) else None
    occurred = events.iso_ms(record.get(WHEN.get(str(record.get("RecordType")), "")))
    ids = (operation_id, record.get("MessageID"))
    events.add_event(parsed, KIND.name, kind, TABLE[kind], ids, occurred)
    return parsed


def receiver(source: Source, _settings: PollerSettings, _client: RedisClient) -> events.Receive:
    own = source.own(PostmarkInbound)
    user = own.postmark_webhook_username.get_secret_value()
    expected = f"{user}:{own.postmark_webhook_password.get_secret_value()}".encode()
    allowed = networks(own.postmark_webhook_networks)

    async def receive(request: web.Request, body: bytes) -> events.Receipt:
        check_source(request.remote, allowed)
        check_credentials(request.headers.get("Authorization"), expected)
        return events.Receipt(parse(body))

    return receive

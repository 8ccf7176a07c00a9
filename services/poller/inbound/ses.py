"""Amazon SES events as they arrive in SQS from the configuration set's SNS topic.

An SQS body is either the SNS envelope (``{"Type": "Notification", "Message": "<event
JSON>"}``, docs.aws.amazon.com/sns/latest/dg/sns-message-and-json-formats.html) or, with raw
message delivery on the subscription, the SES event itself. The event
(docs.aws.amazon.com/ses/latest/dg/event-publishing-retrieving-sns-contents.html): ``eventType``
(``notificationType`` for identity notifications, which carry no tags and so cannot be
joined), ``mail.messageId``, ``mail.tags`` (each tag a list of values, ours being
``operation_id``), and a per-type object holding the event's ``timestamp``.
The queue is ours and only the topic may write to it (its access policy), so the SNS
signature is not checked again here.
"""

from __future__ import annotations

from typing import Any

from services.poller.inbound import events
from shared import codec
from shared.model import Delivery
from shared.providers.ses import KIND

# SES's eventType (and, for bounces, bounceType) -> resetgate's.
TABLE: dict[str, events.Meaning] = {
    "Send": events.Acceptance.ACCEPTED,
    "Delivery": Delivery.DELIVERED,
    "DeliveryDelay": Delivery.DEFERRED,
    "Bounce/Permanent": Delivery.BOUNCED,
    "Bounce/Undetermined": Delivery.BOUNCED,
    "Bounce/Transient": Delivery.DEFERRED,
    "Complaint": Delivery.COMPLAINED,
    "Reject": Delivery.REJECTED,
    "Rendering Failure": Delivery.REJECTED,
    "Open": None,
    "Click": None,
    "Subscription": None,
}
# Where each type keeps its own timestamp; the others use mail.timestamp.
DETAIL = {
    "Delivery": "delivery",
    "DeliveryDelay": "deliveryDelay",
    "Bounce": "bounce",
    "Complaint": "complaint",
}


class Unparseable(ValueError):
    """Not an SES event at all: the message goes to the dead-letter queue."""


def unwrap(body: str) -> dict[str, Any]:
    """The SES event inside an SQS body (SNS envelope or raw), or :class:`Unparseable`."""
    try:
        document = codec.loads(body)
        if isinstance(document, dict) and document.get("Type") == "Notification":
            document = codec.loads(document.get("Message") or "")
    except codec.JSONDecodeError:
        raise Unparseable("not JSON") from None
    if not isinstance(document, dict) or not isinstance(document.get("mail"), dict):
        raise Unparseable("not an SES event")
    return document


def parse(body: str) -> events.Parsed:
    event = unwrap(body)
    parsed = events.Parsed()
    base = event.get("eventType", event.get("notificationType"))
    if not isinstance(base, str):
        parsed.drop(events.Drop.MALFORMED)
        return parsed
    detail = event.get(DETAIL.get(base, ""))
    kind = base
    if base == "Bounce":
        kind = f"Bounce/{detail.get('bounceType') if isinstance(detail, dict) else None}"
    if kind not in TABLE:
        parsed.drop(events.Drop.UNKNOWN_TYPE)
        return parsed
    mail = event["mail"]
    when = detail.get("timestamp") if isinstance(detail, dict) else mail.get("timestamp")
    ids = (_tag(mail.get("tags"), events.OPERATION_ID_FIELD), mail.get("messageId"))
    events.add_event(parsed, KIND.name, kind, TABLE[kind], ids, events.iso_ms(when))
    return parsed


def _tag(tags: Any, name: str) -> Any:
    values = tags.get(name) if isinstance(tags, dict) else None
    return values[0] if isinstance(values, list) and len(values) == 1 else None

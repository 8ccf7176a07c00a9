"""Provider-shaped events, signed as each provider signs them (test helpers).

Every payload follows the provider's documentation, named above each builder; only the
fields the documentation shows are used, with the recipient's address where the provider
puts it (so the PII scans see what a real payload carries).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from shared import codec

RECIPIENT = "player.secret@example.org"


@dataclass
class SendGridSigner:
    """SendGrid's signed Event Webhook: ECDSA P-256 over timestamp + body; the console shows
    the public key as base64 DER (twilio.com/docs/sendgrid/for-developers/tracking-events/
    getting-started-event-webhook-security-features)."""

    private: ec.EllipticCurvePrivateKey

    @classmethod
    def generate(cls) -> SendGridSigner:
        return cls(ec.generate_private_key(ec.SECP256R1()))

    @property
    def public_key(self) -> str:
        der = self.private.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return base64.b64encode(der).decode()

    def headers(self, body: bytes, timestamp: int | None = None) -> dict[str, str]:
        stamp = str(int(time.time()) if timestamp is None else timestamp)
        signature = self.private.sign(stamp.encode() + body, ec.ECDSA(hashes.SHA256()))
        return {
            "X-Twilio-Email-Event-Webhook-Signature": base64.b64encode(signature).decode(),
            "X-Twilio-Email-Event-Webhook-Timestamp": stamp,
            "Content-Type": "application/json",
        }


def sendgrid_event(
    operation_id: str, message_id: str, event: str, at: float, **extra: Any
) -> dict[str, Any]:
    """One event as the Event Webhook reference shows it
    (twilio.com/docs/sendgrid/for-developers/tracking-events/event): custom args top level."""
    return {
        "email": RECIPIENT,
        "timestamp": int(at),
        "event": event,
        "smtp-id": f"<{message_id}@ismtpd0001p1las1.sendgrid.net>",
        "sg_event_id": secrets.token_urlsafe(16),
        "sg_message_id": f"{message_id}.filterdrecv-p3las1-5bf99c48d-4pvl7-20-5D3B2D1F-9.0",
        "operation_id": operation_id,
        **extra,
    }


def mailgun_body(
    key: str,
    operation_id: str,
    message_id: str,
    event: str,
    at: float,
    *,
    token: str | None = None,
    timestamp: int | None = None,
    **extra: Any,
) -> bytes:
    """A webhook body as documentation.mailgun.com/docs/mailgun/user-manual/webhooks/
    securing-webhooks and .../events/ show it: the signature block beside event-data."""
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    token = token or secrets.token_hex(25)  # "randomly generated string with length of 50"
    signature = hmac.new(key.encode(), (stamp + token).encode(), hashlib.sha256).hexdigest()
    event_data = {
        "event": event,
        "timestamp": at,
        "id": secrets.token_urlsafe(16),
        "recipient": RECIPIENT,
        "message": {
            "headers": {
                "message-id": f"{message_id}@mg.game.example",
                "to": RECIPIENT,
                "from": "no-reply@game.example",
            }
        },
        "user-variables": {"operation_id": operation_id},
        **extra,
    }
    return codec.dumps(
        {
            "signature": {"timestamp": stamp, "token": token, "signature": signature},
            "event-data": event_data,
        }
    )


def postmark_record(
    operation_id: str, message_id: str, record: str, at: str, **extra: Any
) -> dict[str, Any]:
    """A Delivery, Bounce or SpamComplaint record (postmarkapp.com/developer/webhooks/
    delivery-webhook, /bounce-webhook, /spam-complaint-webhook)."""
    body: dict[str, Any] = {
        "RecordType": record,
        "MessageID": message_id,
        "ServerID": 23,
        "MessageStream": "outbound",
        "Tag": "password-reset",
        "Metadata": {"operation_id": operation_id},
    }
    if record == "Delivery":
        body.update(Recipient=RECIPIENT, DeliveredAt=at, Details="Test delivery webhook details")
    else:
        body.update(
            ID=4323372036854775807,
            Email=RECIPIENT,
            BouncedAt=at,
            TypeCode=1,
            Type="HardBounce" if record == "Bounce" else "SpamComplaint",
            Description="The server was unable to deliver your message",
            Details="Test bounce details",
            Inactive=True,
            CanActivate=True,
        )
    body.update(extra)
    return body


def basic_auth(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}", "Content-Type": "application/json"}


def ses_event(
    operation_id: str, message_id: str, event: str, at: str, **extra: Any
) -> dict[str, Any]:
    """An event record as SES publishes it to SNS through a configuration set
    (docs.aws.amazon.com/ses/latest/dg/event-publishing-retrieving-sns-examples.html)."""
    mail = {
        "timestamp": at,
        "source": "no-reply@game.example",
        "sendingAccountId": "123456789012",
        "messageId": message_id,
        "destination": [RECIPIENT],
        "headersTruncated": False,
        "tags": {"ses:configuration-set": ["resetgate"], "operation_id": [operation_id]},
    }
    record: dict[str, Any] = {"eventType": event, "mail": mail}
    if event == "Delivery":
        record["delivery"] = {
            "timestamp": at,
            "processingTimeMillis": 546,
            "recipients": [RECIPIENT],
            "smtpResponse": "250 ok",
        }
    elif event == "Bounce":
        record["bounce"] = {
            "bounceType": "Permanent",
            "bounceSubType": "General",
            "timestamp": at,
            "bouncedRecipients": [{"emailAddress": RECIPIENT}],
        }
    elif event == "Complaint":
        record["complaint"] = {
            "timestamp": at,
            "complainedRecipients": [{"emailAddress": RECIPIENT}],
            "complaintFeedbackType": "abuse",
        }
    record.update(extra)
    return record


def iso(at: float) -> str:
    """Seconds -> ISO 8601 with milliseconds and Z, as SES writes it."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)) + f".{int(at * 1000) % 1000:03d}Z"

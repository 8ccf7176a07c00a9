"""Twilio SendGrid v3 Mail Send.

Sources (read 2026-11):
- Mail Send: https://www.twilio.com/docs/sendgrid/api-reference/mail-send/mail-send
  (``POST /v3/mail/send``, bearer key, 202 with ``X-Message-Id``, body limit 30 MB, up
  to 1,000 personalizations; ``custom_args`` travel with the message into every event)
- Errors: https://www.twilio.com/docs/sendgrid/api-reference/how-to-use-the-sendgrid-v3-api/errors
- Responses: https://www.twilio.com/docs/sendgrid/api-reference/how-to-use-the-sendgrid-v3-api/responses
  (403: sender identity not verified, or temporarily blocked for repeated bad requests)
  (5xx: the error body ``{"errors": [{"message"}]}``; no page says such an answer means the
  mail was not taken, so any 5xx or 408 after the request was written is ambiguous)
  (400: the errors name the ``field``; one under ``personalizations`` is about the
  recipient and fails the reset, any other (``from``, ``content`` …) is our sender identity
  or payload and pauses, none says nobody's; 404/405/406/413/415/451 are about our endpoint
  or payload and pause)
- Rate limits: https://www.twilio.com/docs/sendgrid/api-reference/how-to-use-the-sendgrid-v3-api/rate-limits
  (``X-RateLimit-Limit/-Remaining/-Reset``, Reset an epoch; a 429 carries no Retry-After)
- Dynamic templates: the Mail Send page (``template_id``, and per personalization
  ``dynamic_template_data``) and
  https://www.twilio.com/docs/sendgrid/ui/sending-email/how-to-send-an-email-with-dynamic-templates
  (the template holds the subject and both parts). An id SendGrid does not know is still
  answered 202 and the message dropped afterwards (sendgrid/sendgrid-go#255, sendgrid/docs#2616).

No native idempotency key and no lookup a studio can count on (the Email Activity API is
a paid add-on with delayed indexing): an ambiguous send waits for the event window.
"""

from __future__ import annotations

import base64
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import aiohttp
from pydantic import field_validator

from shared import codec
from shared.from_address import parse as parse_from
from shared.model import Outcome
from shared.providers.base import (
    Answer,
    Capabilities,
    EventModel,
    LookupResult,
    Message,
    RateSignalKind,
    Refusal,
    SendResult,
    account_refused,
    message_id,
    send_answer,
    server_error,
    undocumented_refusal,
)
from shared.providers.kind import Kind, ProviderConfig
from shared.rate_signal import retry_in
from shared.settings import KindSettings

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePublicKey

SUCCESS = frozenset({202})
CAPABILITIES = Capabilities(
    idempotency_key="",
    idempotency_retention_seconds=0,
    lookup=None,
    rate_signals=frozenset({RateSignalKind.X_RATELIMIT}),
    events=EventModel.WEBHOOK,
    max_message_bytes=30 * 1024 * 1024,
    max_recipients=1000,
    success_statuses=SUCCESS,
)
_PERMANENT = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "payload_too_large",
    415: "unsupported_media_type",
    451: "data_residency",
}


def address(text: str) -> dict[str, str]:
    """The Mail Send ``from`` object, ``{"email", "name"}`` (the Mail Send page): parsed as
    RFC 5322, so a quoted name with a comma stays one name."""
    found = parse_from(text)
    return {"email": found.email, "name": found.name} if found.name else {"email": found.email}


def body(operation_id: str, message: Message) -> dict[str, Any]:
    personalization: dict[str, Any] = {"to": [{"email": to} for to in message["to"]]}
    shaped: dict[str, Any] = {
        "personalizations": [personalization],
        "from": address(message["from"]),
        "custom_args": {"operation_id": operation_id},
    }
    hosted = message.get("template")
    if hosted:
        shaped["template_id"] = hosted["name"]
        personalization["dynamic_template_data"] = hosted["data"]
        return shaped
    content = [{"type": "text/plain", "value": message["text"]}]
    if message.get("html"):
        content.append({"type": "text/html", "value": message["html"]})
    return {**shaped, "subject": message["subject"], "content": content}


def send_result(answer: Answer, now: float) -> SendResult:
    return send_answer(answer, SUCCESS, _accepted, lambda refused: _refused(refused, now))


def _accepted(answer: Answer) -> SendResult:
    found = message_id(answer.headers.get("X-Message-Id"))
    if not found:
        return SendResult(Outcome.AMBIGUOUS, answer.status, reason="accepted_without_id")
    return SendResult(Outcome.ACCEPTED, answer.status, found, rate=answer.rate())


def _refused(answer: Answer, now: float) -> SendResult:
    status, rate = answer.status, answer.rate()
    if status == 429:
        advice = retry_in(answer.headers.get("X-RateLimit-Reset"), now)
        source = "x-ratelimit-reset" if advice else ""
        return SendResult(
            Outcome.THROTTLED,
            status,
            retry_after=advice,
            reason="rate_limited",
            rate=rate,
            retry_source=source,
        )
    if status == 403:
        # Sender identity not verified, or the account temporarily blocked (Responses page):
        # not our key, and every send is refused alike.
        return replace(account_refused(status, "http_403", _words(answer)), rate=rate)
    if status == 401:
        return SendResult(Outcome.AUTH, status, reason=f"http_{status}", rate=rate)
    if status >= 500 or status == 408:
        return replace(server_error(status), rate=rate)  # written: it may have been taken
    if status == 400:
        return replace(_bad_request(answer), rate=rate)
    if status in _PERMANENT:
        words = _words(answer) or f"HTTP {status} {_PERMANENT[status]}"
        return replace(account_refused(status, _PERMANENT[status], words), rate=rate)
    # Any 4xx SendGrid does not document for Mail Send: nobody says whose it is.
    return replace(undocumented_refusal(status, f"http_{status}"), rate=rate)


def _bad_request(answer: Answer) -> SendResult:
    """A 400 by the ``field`` its errors name (the Errors page): the recipient's
    (``personalizations…``) fails the reset; any other named field is the request we build
    or our sender identity (a pause); no field at all says nobody's (undocumented)."""
    errors = answer.json().get("errors")
    fields = (
        {e.get("field") for e in errors if isinstance(e, dict)}
        if isinstance(errors, list)
        else set()
    )
    named = {f for f in fields if isinstance(f, str) and f}
    if named and all(f.startswith("personalizations") for f in named):
        return SendResult(Outcome.PERMANENT, 400, reason="bad_request", refusal=Refusal.RECIPIENT)
    if named:
        return account_refused(400, "bad_request", _words(answer) or "HTTP 400")
    return undocumented_refusal(400, "bad_request")


def _words(answer: Answer) -> str:
    errors = answer.json().get("errors")
    first = errors[0] if isinstance(errors, list) and errors else None
    words = first.get("message") if isinstance(first, dict) else None
    return words if isinstance(words, str) else ""


class SendGridProvider:
    capabilities = CAPABILITIES

    def __init__(self, config: ProviderConfig, session: aiohttp.ClientSession) -> None:
        self.name = config.name
        self.http = config.http(session)
        self.url = config.url.rstrip("/") + "/v3/mail/send"
        self._auth = {"Authorization": f"Bearer {config.api_key}"}

    async def send(self, operation_id: str, message: Message) -> SendResult:
        headers = {**self._auth, "Content-Type": "application/json"}
        data = codec.dumps(body(operation_id, message))
        return await self.http.send(
            self.url, lambda answer: send_result(answer, time.time()), data=data, headers=headers
        )

    async def lookup(self, operation_id: str) -> LookupResult:
        raise NotImplementedError("SendGrid declares no lookup (capabilities.lookup is None)")

    async def max_send_rate(self) -> float | None:
        return None


class SendGridInbound(KindSettings):
    """What the poller checks SendGrid's Event Webhook with:
    ``RESETGATE_SENDGRID_WEBHOOK_PUBLIC_KEY`` (a configured name's
    ``RESETGATE_PROVIDER_<NAME>_SENDGRID_WEBHOOK_PUBLIC_KEY``)."""

    sendgrid_webhook_public_key: str = ""  # the console's verification key (base64 DER)

    @field_validator("sendgrid_webhook_public_key")
    @classmethod
    def _key_loads(cls, value: str) -> str:
        if value:
            try:
                public_key(value)
            except ValueError as error:
                raise ValueError(f"not a base64 DER public key ({error})") from None
        return value


def public_key(encoded: str) -> EllipticCurvePublicKey:
    """The SendGrid console's verification key (base64 DER); PEM armour is tolerated."""
    # Imported here: only the poller verifies events, and every service imports the kinds.
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import load_der_public_key

    body = "".join(line for line in encoded.strip().splitlines() if "-----" not in line)
    key = load_der_public_key(base64.b64decode(body, validate=True))
    if not isinstance(key, ec.EllipticCurvePublicKey):
        raise ValueError("the SendGrid verification key is not an elliptic-curve public key")
    return key


KIND = Kind(
    "sendgrid",
    SendGridProvider,
    lambda _: CAPABILITIES,
    inbound_settings=SendGridInbound,
    event_credential="SENDGRID_WEBHOOK_PUBLIC_KEY",
    sandbox_dialect="services.sandbox.dialects.sendgrid",
    inbound_decoder="services.poller.inbound.sendgrid",
    vendor="Twilio SendGrid",
    hosts_templates=True,
    preflight="shared.preflight.keyed:sendgrid",
)

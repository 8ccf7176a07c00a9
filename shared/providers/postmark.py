"""Postmark Email API.

Sources (read 2026-11):
- Send a single email: https://postmarkapp.com/developer/api/email-api
  (``POST /email``, ``X-Postmark-Server-Token``; 200 ``{"To","SubmittedAt","MessageID",
  "ErrorCode": 0, "Message": "OK"}``; ``Metadata`` travels into webhooks and searches;
  at most 50 recipients; 10 MB per message)
- API overview, HTTP status and error codes: https://postmarkapp.com/developer/api/overview
  (401 bad token; 413 payload too large; 422 with ``ErrorCode``; 429 rate limited; 500;
  503 planned maintenance; every error body ``{"ErrorCode", "Message"}``; a 404 asks to
  "ensure the endpoint … are correct": our base URL, so the provider pauses. A 5xx, in
  that shape or not, after the request was written is ambiguous: no page says it was not
  taken)
- ErrorCode 300 naming the From: https://postmarkapp.com/support/article/troubleshooting-422-unprocessable-entity-errors
  (``"Invalid 'From' address: '…' is not a verified sender signature."``) and
  https://postmarkapp.com/support/article/1180-what-does-errorcode-300-mean (an unquoted
  display name with punctuation): our sender, not the player; any other 300 is about the
  request's recipient (an invalid ``To``).
- Outbound message search by metadata: https://postmarkapp.com/developer/api/messages-api
  and https://postmarkapp.com/support/article/1125-custom-metadata-faq
  (``GET /messages/outbound?count=&offset=&metadata_<key>=<value>``; messages kept for the
  server's retention, 45 days by default)
- Templates: https://postmarkapp.com/developer/api/templates-api (``POST /email/withTemplate``
  with ``TemplateAlias`` and ``TemplateModel``; the template holds the subject and both
  parts); a template that does not exist is 422 ErrorCode 1101, "Template ID invalid or not
  found" (the overview's error codes).

No native idempotency key. The search is a *found-only* lookup: a message it finds was
taken, but Postmark documents nowhere how soon a send appears in it, so "not found" never
allows a replay (the attempt waits for a webhook or the window, then ``review``).
"""

from __future__ import annotations

import ipaddress
from typing import Any

import aiohttp
from pydantic import SecretStr, field_validator

from shared import codec
from shared.from_address import parse as parse_from
from shared.model import Outcome
from shared.providers.base import (
    Answer,
    Capabilities,
    EventModel,
    LookupResult,
    LookupTrust,
    Message,
    RateSignalKind,
    Refusal,
    SendResult,
    account_refused,
    advised,
    first_id,
    lookup_answer,
    message_id,
    send_answer,
    server_error,
    undocumented_refusal,
)
from shared.providers.kind import Kind, ProviderConfig
from shared.settings import KindSettings

SUCCESS = frozenset({200})
RETENTION_SECONDS = 45 * 86400

# ErrorCode -> (outcome, reason): the codes Postmark documents for a send. Account-level
# refusals pause the provider (as a rejected key does): every send would fail the same way.
# The AUTH codes that refuse the account or its sender, not our token.
ACCOUNT_CODES = frozenset({400, 401, 405, 412, 413, 1101})
# The codes documented as about the request's recipient: the only ones that fail a reset
# (300 "Invalid email request" naming the To, 406 "Inactive recipient").
RECIPIENT_CODES = frozenset({300, 406})
ERROR_CODES: dict[int, tuple[Outcome, str]] = {
    10: (Outcome.AUTH, "bad_or_missing_api_token"),
    100: (Outcome.TRANSIENT, "maintenance"),
    300: (Outcome.PERMANENT, "invalid_email_request"),
    400: (Outcome.AUTH, "sender_signature_not_found"),
    401: (Outcome.AUTH, "sender_signature_not_confirmed"),
    402: (Outcome.PERMANENT, "invalid_json"),
    403: (Outcome.PERMANENT, "incompatible_json"),
    405: (Outcome.AUTH, "not_allowed_to_send"),
    406: (Outcome.PERMANENT, "inactive_recipient"),
    409: (Outcome.PERMANENT, "json_required"),
    410: (Outcome.PERMANENT, "too_many_batch_messages"),
    411: (Outcome.PERMANENT, "forbidden_attachment_type"),
    412: (Outcome.AUTH, "account_pending"),
    413: (Outcome.AUTH, "account_may_not_send"),
    429: (Outcome.THROTTLED, "rate_limit_exceeded"),
    # The configured template is missing from the server: an account-level refusal too.
    1101: (Outcome.AUTH, "template_not_found"),
}
_STATUS: dict[int, tuple[Outcome, str]] = {
    401: (Outcome.AUTH, "unauthorized"),
    404: (Outcome.AUTH, "entity_does_not_exist"),
    413: (Outcome.PERMANENT, "payload_too_large"),
    415: (Outcome.PERMANENT, "unsupported_media_type"),
    429: (Outcome.THROTTLED, "rate_limit_exceeded"),
}
# Statuses whose documented meaning is our side (the endpoint, the payload we build), never
# the recipient: the provider pauses at the first one, Postmark's words in the pause.
ACCOUNT_STATUSES = frozenset({404, 413, 415})
# An ErrorCode 300 whose message names the From is about our sender (troubleshooting-422).
_FROM = ("'from'", "sender signature", "from address")


def capabilities(settle_seconds: float) -> Capabilities:
    return Capabilities(
        idempotency_key="",
        idempotency_retention_seconds=0,
        # Found-only: Postmark documents no delay after which the search is complete.
        lookup=LookupTrust(
            settle_seconds,
            RETENTION_SECONDS,
            "GET /messages/outbound?metadata_operation_id=",
            proves_absence=False,
        ),
        rate_signals=frozenset({RateSignalKind.RETRY_AFTER, RateSignalKind.NONE}),
        events=EventModel.WEBHOOK,
        max_message_bytes=10 * 1024 * 1024,
        max_recipients=50,
        success_statuses=SUCCESS,
    )


def body(operation_id: str, message: Message) -> dict[str, Any]:
    shaped: dict[str, Any] = {
        # Punctuation in the name quoted (support article 1180, ErrorCode 300).
        "From": parse_from(message["from"]).header,
        "To": ", ".join(message["to"]),
        "Metadata": {"operation_id": operation_id},
        "MessageStream": "outbound",
    }
    hosted = message.get("template")
    if hosted:
        return {**shaped, "TemplateAlias": hosted["name"], "TemplateModel": hosted["data"]}
    shaped.update(Subject=message["subject"], TextBody=message["text"])
    if message.get("html"):
        shaped["HtmlBody"] = message["html"]
    return shaped


def _error_code(answer: Answer) -> int | None:
    code = answer.json().get("ErrorCode")
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def _words(answer: Answer) -> str:
    words = answer.json().get("Message")
    return words if isinstance(words, str) else ""


def send_result(answer: Answer) -> SendResult:
    return send_answer(answer, SUCCESS, _accepted, _refused)


def _accepted(answer: Answer) -> SendResult:
    reply = answer.json()
    found = message_id(reply.get("MessageID"))
    if reply.get("ErrorCode") != 0 or not found:
        return SendResult(Outcome.AMBIGUOUS, answer.status, reason="success_without_message_id")
    return SendResult(Outcome.ACCEPTED, answer.status, found)


def _refused(answer: Answer) -> SendResult:
    status, code = answer.status, _error_code(answer)
    if status == 403 and code is None:
        # Postmark's network layer (no ErrorCode): every send from here is refused alike.
        return account_refused(status, "forbidden", _words(answer) or "HTTP 403 Forbidden")
    if status >= 500 or status == 408:
        return server_error(status)  # the body was written: it may have been taken
    if status == 422 and code is not None:
        return _error_coded(answer, code)
    if status in ACCOUNT_STATUSES:
        words = _words(answer) or f"HTTP {status}: ensure the endpoint and payload are correct"
        return account_refused(status, _STATUS[status][1], words)
    outcome, reason = _STATUS.get(status, (Outcome.PERMANENT, f"http_{status}"))
    if status not in _STATUS:
        return undocumented_refusal(status, reason)
    return advised(answer, outcome, reason)


def _error_coded(answer: Answer, code: int) -> SendResult:
    """A 422 by its ErrorCode (the API overview's table): who the refusal is about."""
    words = _words(answer)
    if code == 300 and any(w in words.lower() for w in _FROM):
        return account_refused(422, "invalid_from", words)
    if code in ACCOUNT_CODES:
        return account_refused(422, ERROR_CODES[code][1], words)
    if code not in ERROR_CODES:
        return undocumented_refusal(422, f"error_code_{code}")
    outcome, reason = ERROR_CODES[code]
    if outcome is Outcome.PERMANENT and code not in RECIPIENT_CODES:
        # Our request's shape (invalid JSON, too many messages …): every send alike.
        return account_refused(422, reason, words or reason)
    return advised(answer, outcome, reason, refusal=Refusal.RECIPIENT)


def found_message_id(body: dict[str, Any], operation_id: str) -> str:
    def ours(row: dict[str, Any]) -> bool:
        metadata = row.get("Metadata")
        return isinstance(metadata, dict) and metadata.get("operation_id") == operation_id

    return first_id(body.get("Messages"), ours, lambda row: row.get("MessageID"), "a Messages list")


class PostmarkProvider:
    def __init__(self, config: ProviderConfig, session: aiohttp.ClientSession) -> None:
        self.name = config.name
        self.http = config.http(session)
        self.base_url = config.url.rstrip("/")
        self._auth = {"X-Postmark-Server-Token": config.api_key, "Accept": "application/json"}
        self.capabilities = capabilities(config.settle_seconds)

    async def send(self, operation_id: str, message: Message) -> SendResult:
        headers = {**self._auth, "Content-Type": "application/json"}
        data = codec.dumps(body(operation_id, message))
        path = "/email/withTemplate" if message.get("template") else "/email"
        return await self.http.send(self.base_url + path, send_result, data=data, headers=headers)

    async def lookup(self, operation_id: str) -> LookupResult:
        params = {"count": "10", "offset": "0", "metadata_operation_id": operation_id}
        answer = await self.http.ask(
            "GET", self.base_url + "/messages/outbound", params=params, headers=self._auth
        )
        return lookup_answer(answer, lambda body: found_message_id(body, operation_id))

    async def max_send_rate(self) -> float | None:
        return None


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class PostmarkInbound(KindSettings):
    """What the poller checks Postmark's webhooks with: the basic-auth credentials written
    into the webhook's URL (``RESETGATE_POSTMARK_WEBHOOK_USERNAME`` / ``_PASSWORD``) and the
    source networks allowed to post (a configured name's ``RESETGATE_PROVIDER_<NAME>_...``)."""

    postmark_webhook_username: SecretStr = SecretStr("")
    postmark_webhook_password: SecretStr = SecretStr("")
    postmark_webhook_networks: str = ""  # CIDRs, comma-separated; empty: any source

    @field_validator("postmark_webhook_networks")
    @classmethod
    def _networks_parse(cls, value: str) -> str:
        networks(value)  # ValueError names the bad entry
        return value


def networks(spec: str) -> list[Network]:
    """``"192.0.2.0/24, 2001:db8::/32"`` -> networks (a bare address is a /32 or /128)."""
    return [ipaddress.ip_network(part.strip()) for part in spec.split(",") if part.strip()]


KIND = Kind(
    "postmark",
    PostmarkProvider,
    lambda config: capabilities(config.settle_seconds),
    inbound_settings=PostmarkInbound,
    event_credential="POSTMARK_WEBHOOK_PASSWORD",
    sandbox_dialect="services.sandbox.dialects.postmark",
    inbound_decoder="services.poller.inbound.postmark",
    vendor="Postmark",
    hosts_templates=True,
    preflight="shared.preflight.keyed:postmark",
)

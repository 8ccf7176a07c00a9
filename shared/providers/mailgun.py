"""Mailgun Messages API (US ``https://api.mailgun.net``, EU ``https://api.eu.mailgun.net``).

Sources (read 2026-11):
- Send: https://documentation.mailgun.com/docs/mailgun/api-reference/send/mailgun/messages
  (``POST /v3/{domain}/messages``, basic auth ``api:<key>``, form fields ``from``, ``to``,
  ``subject``, ``text``, ``html`` and ``v:<name>`` user variables; 200
  ``{"id": "<…>", "message": "Queued. Thank you."}``; 25 MB per message, 1,000 recipients)
- Response codes: https://documentation.mailgun.com/docs/mailgun/quickstart-guide/responses
  (400 with a "message": one naming the recipient (``'to' parameter is not a valid
  address``) fails that reset, any other text is undocumented; 401/403 auth or access denied;
  404 "can be temporal" — the system is eventually consistent — but a 404 without a JSON
  body is "a mistake in the API request, such as a non-existing endpoint" (a base URL
  ending in ``/v3`` gets it): ours, the provider pauses; 429 retry as the response says;
  500 "retry with backoff" — yet no page says the mail was not taken, so any 5xx or 408
  after the request was written is ambiguous)
- Events and polling: https://documentation.mailgun.com/docs/mailgun/api-reference/send/mailgun/events
  and https://documentation.mailgun.com/docs/mailgun/user-manual/events/event-polling
  (``GET /v3/{domain}/events``; the documented filter fields are event, list, attachment,
  from, message-id, subject, to, size, recipient(s), tags, severity — ``user-variables`` is
  not one; events reach storage out of order, a page is trustworthy only once its events
  are older than a threshold, "e.g. half an hour"; events kept at least 3 days; the Events
  API is deprecated in favour of the Logs API)
- Templates: https://documentation.mailgun.com/docs/mailgun/user-manual/sending-messages/send-templates
  (form fields ``template`` and ``t:variables``, a JSON object; the template holds the
  parts). A template name Mailgun does not know is still accepted and never sent
  (sargue/mailgun#41): only the events show it.

No native idempotency key. The Events API is a *found-only* lookup: every row is checked
for our operation id, so "found" is proof; "not found" may be a filter Mailgun ignored and
never allows a replay.
"""

from __future__ import annotations

import base64
import re
import time
from dataclasses import replace
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any

import aiohttp
from pydantic import Field, SecretStr

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
from shared.providers.kind import Kind, ProviderConfig, needs
from shared.rate_signal import retry_in
from shared.retry_after import Source
from shared.settings import KindSettings

SUCCESS = frozenset({200})
# A throttled send's wait in Mailgun's own words: "… try again after <RFC 1123 date>" (a 420
# or 429; e.g. github.com/mailgun/mailgun-java/issues/50). Read before any header.
_TRY_AGAIN = re.compile(r"try again after\s+([^\n]{1,64}?)\s*$", re.IGNORECASE)
_STATED_TAIL = 128
# Answers that refuse every send of the domain or account, not one address (the message
# texts Mailgun gives; a 404 "Domain not found" is also what a domain on the other region's
# base URL gets): the provider pauses with Mailgun's words as the reason.
ACCOUNT_REFUSALS: dict[int, dict[str, str]] = {
    400: {
        "is not allowed to send": "domain_not_allowed",
        "please activate your mailgun account": "account_not_activated",
        "free accounts are for test purposes only": "free_account",
    },
    404: {"domain not found": "domain_not_found"},
}
# A 400's message about the recipient (the Messages API's ``to``): the reset fails; any other
# 400 text no page explains is undocumented (the operation waits; the guard counts it).
_RECIPIENT_WORDS = ("'to'", "to parameter", "recipient", "not a valid address")
EVENT_RETENTION_SECONDS = 3 * 86400
_PERMANENT = {
    400: "bad_request",
    413: "payload_too_large",
    414: "uri_too_long",
    415: "unsupported_media_type",
}


def capabilities(settle_seconds: float) -> Capabilities:
    return Capabilities(
        idempotency_key="",
        idempotency_retention_seconds=0,
        # Found-only: ``user-variables`` is no documented filter of the Events API, so an
        # answer that ignored it is a page of other sends, never a proof of absence.
        lookup=LookupTrust(
            settle_seconds,
            EVENT_RETENTION_SECONDS,
            "GET /v3/{domain}/events?event=accepted&user-variables=",
            proves_absence=False,
        ),
        rate_signals=frozenset({RateSignalKind.RETRY_AFTER, RateSignalKind.X_RATELIMIT}),
        events=EventModel.WEBHOOK,
        max_message_bytes=25 * 1024 * 1024,
        max_recipients=1000,
        success_statuses=SUCCESS,
    )


def form(operation_id: str, message: Message) -> aiohttp.FormData:
    data = aiohttp.FormData()
    data.add_field("from", parse_from(message["from"]).header)
    for to in message["to"]:
        data.add_field("to", to)
    hosted = message.get("template")
    if hosted:
        data.add_field("template", hosted["name"])
        data.add_field("t:variables", codec.dumps(hosted["data"]).decode())
    else:
        data.add_field("subject", message["subject"])
        data.add_field("text", message["text"])
        if message.get("html"):
            data.add_field("html", message["html"])
    data.add_field("v:operation_id", operation_id)
    return data


def bare(mailgun_id: str) -> str:
    """A Mailgun message id as resetgate keeps it, whoever names it (the send's answer
    ``<id@domain>``, an event's Message-Id header ``id@domain``): without angle brackets and
    without ``@domain`` (our sending domain, but address-shaped: kept out of the store so the
    personal-data scan stays exact)."""
    return mailgun_id.strip().removeprefix("<").removesuffix(">").split("@", 1)[0]


def send_result(answer: Answer) -> SendResult:
    return send_answer(answer, SUCCESS, _accepted, _not_accepted)


def _accepted(answer: Answer) -> SendResult:
    found = message_id(bare(str(answer.json().get("id") or "")))
    if not found:
        return SendResult(Outcome.AMBIGUOUS, answer.status, reason="accepted_without_id")
    return SendResult(Outcome.ACCEPTED, answer.status, found, rate=answer.rate())


def _not_accepted(answer: Answer) -> SendResult:
    """A 4xx or 5xx: a server error, a throttle, or a refusal."""
    status = answer.status
    if status >= 500 or status == 408:
        return replace(server_error(status), rate=answer.rate())  # it may have been taken
    wait, source = throttle_wait(answer, time.time())
    if status == 429 or source == Source.MESSAGE:
        return SendResult(
            Outcome.THROTTLED,
            status,
            reason=f"http_{status}",
            retry_after=wait,
            server_date=answer.headers.get("Date"),
            rate=answer.rate(),
            retry_source=source,
        )
    refusal = account_refusal(answer)
    return refusal if refusal is not None else _refused(answer)


def _refused(answer: Answer) -> SendResult:
    """A 4xx that is not a throttle nor a refusal of the domain, account or endpoint."""
    status = answer.status
    outcome, reason = _outcome(status), _PERMANENT.get(status, f"http_{status}")
    if status in _PERMANENT and status != 400:
        # 413/414/415: the request we build, not the recipient: every send alike.
        return account_refused(status, reason, _words(answer) or f"HTTP {status} {reason}")
    if status == 400 and not _about_recipient(_words(answer)):
        return replace(undocumented_refusal(status, reason), rate=answer.rate())
    if outcome is Outcome.TRANSIENT and status != 404:
        return replace(undocumented_refusal(status, reason), rate=answer.rate())
    return advised(answer, outcome, reason, rate=True)


def throttle_wait(answer: Answer, now: float) -> tuple[str | None, str]:
    """How long a throttled Mailgun send should wait, in order of trust: the date its
    message states ("… try again after Mon, 25 Aug 2025 07:00:31 UTC"), then Retry-After,
    then X-RateLimit-Reset (epoch seconds, as the official SDKs read it). (delay, source):
    source "" lets shared.retry_after name the Retry-After form itself."""
    stated = _stated_wait(answer.json().get("message"), now)
    if stated is not None:
        return stated, Source.MESSAGE
    header = answer.headers.get("Retry-After")
    if header:
        return header, ""
    reset = retry_in(answer.headers.get("X-RateLimit-Reset"), now)
    return (reset, Source.RATE_RESET) if reset is not None else (None, "")


def _stated_wait(words: object, now: float) -> str | None:
    # The date ends the message: only its tail is searched, so a hostile 60 KB message costs
    # no more than a short one (the pattern backtracks over every space it is given).
    tail = words.rstrip()[-_STATED_TAIL:] if isinstance(words, str) else None
    found = _TRY_AGAIN.search(tail) if tail else None
    if found is None:
        return None
    try:
        at = parsedate_to_datetime(found.group(1).strip())
    except (TypeError, ValueError, IndexError):
        return None
    if at.tzinfo is None:
        return None  # a date without a zone names no instant
    # Kept an instant (an HTTP date), not a delay rounded up to whole seconds: the pacer
    # resumes exactly then (services/sender/pacing.py).
    return format_datetime(max(at, datetime.fromtimestamp(now, UTC)).astimezone(UTC), usegmt=True)


def account_refusal(answer: Answer) -> SendResult | None:
    """The pause for a refusal of the whole domain or account, or of our endpoint (a 404
    that is not Mailgun's JSON), None for any other answer."""
    if answer.status == 404 and not documented_error(answer):
        return account_refused(
            404,
            "endpoint_not_found",
            "HTTP 404 without Mailgun's JSON: a non-existing endpoint; "
            "check the base URL (no /v3) and region",
        )
    texts = ACCOUNT_REFUSALS.get(answer.status)
    words = answer.json().get("message") if texts else None
    if not isinstance(words, str):
        return None
    lowered = words.lower()
    for text, reason in (texts or {}).items():
        if text in lowered:
            return account_refused(answer.status, reason, words)
    return None


def _about_recipient(words: str) -> bool:
    """A 400 whose message names the recipient ("'to' parameter is not a valid address")."""
    lowered = words.lower()
    return any(text in lowered for text in _RECIPIENT_WORDS)


def _words(answer: Answer) -> str:
    words = answer.json().get("message")
    return words if isinstance(words, str) else ""


def documented_error(answer: Answer) -> bool:
    """Mailgun's error shape (API Response Codes): JSON with a ``"message"`` text."""
    return isinstance(answer.json().get("message"), str)


def _outcome(status: int) -> Outcome:
    if status in (401, 403):
        return Outcome.AUTH
    if status in _PERMANENT:
        return Outcome.PERMANENT
    return Outcome.TRANSIENT  # 404 "can be temporal"; anything else is undocumented


def found_message_id(body: dict[str, object], operation_id: str) -> str:
    def ours(item: dict[str, Any]) -> bool:
        variables = item.get("user-variables")
        return (
            item.get("event") == "accepted"
            and isinstance(variables, dict)
            and (variables.get("operation_id") == operation_id)
        )

    return first_id(
        body.get("items"), ours, lambda item: bare(_message_id_header(item)), "an items list"
    )


def _message_id_header(item: dict[str, Any]) -> str:
    message = item.get("message")
    headers = message.get("headers") if isinstance(message, dict) else None
    return str(headers.get("message-id") or "") if isinstance(headers, dict) else ""


class MailgunSettings(KindSettings):
    """What only a Mailgun account reads (``RESETGATE_MAILGUN_DOMAIN``, a configured name's
    ``RESETGATE_PROVIDER_<NAME>_MAILGUN_DOMAIN``)."""

    INHERITED = ("mailgun_events_delay_seconds",)

    mailgun_domain: str = Field(default="", pattern=r"^[A-Za-z0-9.-]{0,253}$")
    # Mailgun documents that its events become complete only after a delay ("half an
    # hour"): a lookup about a younger send can miss it.
    mailgun_events_delay_seconds: float = Field(default=1800.0, ge=0)


class MailgunInbound(KindSettings):
    """What the poller checks Mailgun's webhooks with: the webhook signing key
    (``RESETGATE_MAILGUN_WEBHOOK_SIGNING_KEY``, a configured name's
    ``RESETGATE_PROVIDER_<NAME>_MAILGUN_WEBHOOK_SIGNING_KEY``)."""

    mailgun_webhook_signing_key: SecretStr = SecretStr("")


class MailgunProvider:
    def __init__(self, config: ProviderConfig, session: aiohttp.ClientSession) -> None:
        self.name = config.name
        self.http = config.http(session)
        self.base = f"{config.url.rstrip('/')}/v3/{config.own(MailgunSettings).mailgun_domain}"
        token = base64.b64encode(f"api:{config.api_key}".encode()).decode()
        self._auth = {"Authorization": f"Basic {token}"}
        self.capabilities = capabilities(_settle(config))

    async def send(self, operation_id: str, message: Message) -> SendResult:
        data = form(operation_id, message)
        return await self.http.send(
            self.base + "/messages", send_result, data=data, headers=self._auth
        )

    async def lookup(self, operation_id: str) -> LookupResult:
        since = time.time() - EVENT_RETENTION_SECONDS
        params = {
            "event": "accepted",
            "ascending": "yes",
            "limit": "10",
            "begin": str(int(since)),
            "user-variables": codec.dumps({"operation_id": operation_id}).decode(),
        }
        answer = await self.http.ask(
            "GET", self.base + "/events", params=params, headers=self._auth
        )
        return lookup_answer(answer, lambda body: found_message_id(body, operation_id))

    async def max_send_rate(self) -> float | None:
        return None


def _settle(config: ProviderConfig) -> float:
    # Mailgun's events are complete only after their documented delay.
    return max(config.settle_seconds, config.own(MailgunSettings).mailgun_events_delay_seconds)


KIND = Kind(
    "mailgun",
    MailgunProvider,
    lambda config: capabilities(_settle(config)),
    settings=MailgunSettings,
    inbound_settings=MailgunInbound,
    event_credential="MAILGUN_WEBHOOK_SIGNING_KEY",
    sandbox_dialect="services.sandbox.dialects.mailgun",
    inbound_decoder="services.poller.inbound.mailgun",
    vendor="Mailgun",
    hosts_templates=True,
    preflight="shared.preflight.keyed:mailgun",
    lacks=needs("provider_api_key", "mailgun_domain", "provider_url"),
)

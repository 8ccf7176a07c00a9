"""Mailgun Messages API (US ``https://api.mailgun.net``, EU ``https://api.eu.mailgun.net``).

Sources (read 2026-11):
- Send: https://documentation.mailgun.com/docs/mailgun/api-reference/send/mailgun/messages
  (``POST /v3/{domain}/messages``, basic auth ``api:<key>``, form fields ``from``, ``to``,
  ``subject``, ``text``, ``html`` and ``v:<name>`` user variables; 200
  ``{"id": "<…>", "message": "Queued. Thank you."}``; 25 MB per message, 1,000 recipients)
- Response codes: https://documentation.mailgun.com/docs/mailgun/quickstart-guide/responses
  (400 with a "message"; 401/403 auth or access denied; 404 "can be temporal" — the system
  is eventually consistent; 429 retry as the response says; 500 retry with backoff)
- Events and polling: https://documentation.mailgun.com/docs/mailgun/api-reference/send/mailgun/events
  and https://documentation.mailgun.com/docs/mailgun/user-manual/events/event-polling
  (``GET /v3/{domain}/events``, filter ``user-variables``; events reach storage out of
  order, a page is trustworthy only once its events are older than a threshold, "e.g.
  half an hour"; events kept at least 3 days)

- Templates: https://documentation.mailgun.com/docs/mailgun/user-manual/sending-messages/send-templates
  (form fields ``template`` and ``t:variables``, a JSON object; the template holds the
  parts). A template name Mailgun does not know is still accepted and never sent
  (sargue/mailgun#41): only the events show it.

No native idempotency key. The Events API is the lookup, trusted only about sends older
than the completeness delay (``RESETGATE_MAILGUN_EVENTS_DELAY_SECONDS``).
"""

from __future__ import annotations

import base64
import time
from typing import Any

import aiohttp

from shared import codec
from shared.model import Outcome
from shared.providers.base import (
    Answer,
    Capabilities,
    EventModel,
    Http,
    LookupResult,
    LookupTrust,
    Message,
    RateSignalKind,
    SendResult,
    first_id,
    lookup_answer,
    message_id,
    redirect,
    redirected,
    transport_failure,
    undocumented_success,
)

SUCCESS = frozenset({200})
EVENT_RETENTION_SECONDS = 3 * 86400
_PERMANENT = {400: "bad_request", 413: "payload_too_large", 414: "uri_too_long",
              415: "unsupported_media_type"}  # fmt: skip


def capabilities(settle_seconds: float) -> Capabilities:
    return Capabilities(
        idempotency_key="",
        idempotency_retention_seconds=0,
        lookup=LookupTrust(
            settle_seconds,
            EVENT_RETENTION_SECONDS,
            "GET /v3/{domain}/events?event=accepted&user-variables=",
        ),
        rate_signals=frozenset({RateSignalKind.RETRY_AFTER, RateSignalKind.X_RATELIMIT}),
        events=EventModel.WEBHOOK,
        max_message_bytes=25 * 1024 * 1024,
        max_recipients=1000,
        success_statuses=SUCCESS,
    )


def form(operation_id: str, message: Message) -> aiohttp.FormData:
    data = aiohttp.FormData()
    data.add_field("from", message["from"])
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
    status = answer.status
    if redirect(status):
        return redirected(status)
    if status in SUCCESS:
        found = message_id(bare(str(answer.json().get("id") or "")))
        if not found:
            return SendResult(Outcome.AMBIGUOUS, status, reason="accepted_without_id")
        return SendResult(Outcome.ACCEPTED, status, found, rate=answer.rate())
    if 200 <= status < 300:
        return undocumented_success(status)
    return SendResult(
        _outcome(status), status, reason=_PERMANENT.get(status, f"http_{status}"),
        retry_after=answer.headers.get("Retry-After"), server_date=answer.headers.get("Date"),
        rate=answer.rate(),
    )  # fmt: skip


def _outcome(status: int) -> Outcome:
    if status == 429:
        return Outcome.THROTTLED
    if status in (401, 403):
        return Outcome.AUTH
    if status in _PERMANENT:
        return Outcome.PERMANENT
    return Outcome.TRANSIENT  # 404 "can be temporal", 5xx, and anything undocumented


def found_message_id(body: dict[str, object], operation_id: str) -> str:
    def ours(item: dict[str, Any]) -> bool:
        variables = item.get("user-variables")
        return (
            item.get("event") == "accepted"
            and isinstance(variables, dict)
            and (variables.get("operation_id") == operation_id)
        )

    return first_id(body.get("items"), ours, lambda item: bare(_message_id_header(item)),
                    "an items list")  # fmt: skip


def _message_id_header(item: dict[str, Any]) -> str:
    message = item.get("message")
    headers = message.get("headers") if isinstance(message, dict) else None
    return str(headers.get("message-id") or "") if isinstance(headers, dict) else ""


class MailgunProvider:
    def __init__(
        self, session: aiohttp.ClientSession, base_url: str, api_key: str, domain: str, *,
        connect_timeout: float = 3.0, total_timeout: float = 15.0,
        settle_seconds: float = 1800.0, name: str = "mailgun",
    ) -> None:  # fmt: skip
        self.name = name
        self.http = Http(session, name, connect_timeout, total_timeout)
        self.base = f"{base_url.rstrip('/')}/v3/{domain}"
        token = base64.b64encode(f"api:{api_key}".encode()).decode()
        self._auth = {"Authorization": f"Basic {token}"}
        self.capabilities = capabilities(settle_seconds)

    async def send(self, operation_id: str, message: Message) -> SendResult:
        try:
            data = form(operation_id, message)
            answer = await self.http.request(
                "POST", self.base + "/messages", data=data, headers=self._auth
            )
        except (aiohttp.ClientError, TimeoutError) as error:
            return transport_failure(error)
        return send_result(answer)

    async def lookup(self, operation_id: str) -> LookupResult:
        since = time.time() - EVENT_RETENTION_SECONDS
        params = {
            "event": "accepted", "ascending": "yes", "limit": "10", "begin": str(int(since)),
            "user-variables": codec.dumps({"operation_id": operation_id}).decode(),
        }  # fmt: skip
        answer = await self.http.ask("GET", self.base + "/events", params=params,
                                     headers=self._auth)  # fmt: skip
        if answer.status != 200:
            return lookup_answer(answer)
        return lookup_answer(answer, found_message_id(answer.json(), operation_id))

    async def max_send_rate(self) -> float | None:
        return None

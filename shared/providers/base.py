"""The adapter contract every email provider implements, and what adapters share.

An adapter turns one provider's API into the outcome classes of ``shared.model.Outcome``
and declares what the provider can do (:class:`Capabilities`). Policy — how an ambiguous
attempt is settled, which rate signals feed the pacer — is decided from that record,
never from the provider's name.

Every HTTP call an adapter makes goes through :func:`request`: explicit timeouts, a
bounded body, and no redirect ever followed (a 3xx would re-post the reset link to
whatever host ``Location`` names, or turn a send into a GET whose 200 means nothing).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

import aiohttp

from shared import codec, metrics
from shared.ids import valid_provider_message_id
from shared.model import Outcome
from shared.rate_signal import RateSignal, from_headers

MAX_BODY = 64 * 1024
# The reason of a throttle that says the daily quota is used up (not the send rate): the
# sender waits the window out (shared.quota). Here, so an adapter needs no Redis client.
QUOTA_EXCEEDED = "daily_quota_exceeded"
# The generic message the sender renders; each adapter maps it onto its provider's shape.
Message = dict[str, Any]


class EventModel(StrEnum):
    POLL = "poll"  # the poller reads a feed
    WEBHOOK = "webhook"  # the provider pushes signed events
    QUEUE = "queue"  # events arrive on a queue (SES -> SNS -> SQS)


class Refusal(StrEnum):
    """Whose refusal a provider's answer is: the one rule every adapter classifies by
    (docs/providers.md, "Whose refusal is it").

    An operation fails on a refusal only when the provider documents the answer as about
    that recipient. A documented refusal of our key, account, sender identity, domain,
    endpoint or configuration pauses the provider at its first occurrence (an ``AUTH``
    outcome, :func:`account_refused`). A refusal nobody documented keeps the operation
    waiting and counts toward the refusals guard (services/sender/guard.py).
    """

    RECIPIENT = "recipient"  # documented as about this recipient: the operation fails
    UNDOCUMENTED = "undocumented"  # nobody documents it: the operation waits; the guard counts


class RateSignalKind(StrEnum):
    RETRY_AFTER = "retry-after"
    X_RATELIMIT = "x-ratelimit"  # X-RateLimit-Limit / -Remaining / -Reset
    ACCOUNT_QUOTA = "account-quota"  # a maximum send rate the account reports (SES)
    NONE = "none"  # a 429 with nothing to say when: capped backoff


@dataclass(frozen=True, slots=True)
class LookupTrust:
    """How far a provider's "find my send by operation id" can be believed.

    ``settle_seconds``: a send younger than this may be missing from the answer (events
    still on their way, or the provider still processing a request we timed out on);
    ``horizon_seconds``: a send older than this may have been forgotten (retention);
    ``proves_absence``: the provider documents the answer as complete for our key after
    ``settle_seconds``, so "not found" means "never accepted". Otherwise the lookup is
    *found-only*: "found" settles the attempt, "not found" proves nothing (a filter the
    provider ignores, an index that lags by an undocumented delay) and never allows a
    replay.
    """

    settle_seconds: float
    horizon_seconds: float
    how: str  # what the adapter asks, for docs and logs
    proves_absence: bool


@dataclass(frozen=True, slots=True)
class Capabilities:
    idempotency_key: str  # the header or field, "" when the provider has none
    idempotency_retention_seconds: float  # 0 when there is no native key
    lookup: LookupTrust | None
    rate_signals: frozenset[RateSignalKind]
    events: EventModel
    max_message_bytes: int
    max_recipients: int
    success_statuses: frozenset[int]  # the documented 2xx of a send; any other 2xx is ambiguous

    @property
    def native_key(self) -> bool:
        return bool(self.idempotency_key) and self.idempotency_retention_seconds > 0


@dataclass(frozen=True, slots=True)
class SendResult:
    outcome: Outcome
    status: int = 0
    message_id: str = ""
    replayed: bool = False
    retry_after: str | None = None
    server_date: str | None = None
    reason: str = ""  # the provider's reason code for permanent and auth outcomes
    rate: RateSignal | None = None  # X-RateLimit-* and the like, for the pacer
    # Where ``retry_after`` came from when the provider sent no Retry-After header (a
    # ``shared.retry_after.Source`` value, e.g. SendGrid's X-RateLimit-Reset).
    retry_source: str = ""
    # An AUTH outcome pauses the provider: "account" when the provider refused the whole
    # account or domain (a documented answer), else our credentials. ``detail``: the
    # provider's own words, for the pause (shared.control sanitises them).
    pause: str = "credentials"
    detail: str = ""
    # A PERMANENT outcome's :class:`Refusal`: only a recipient refusal fails the operation.
    refusal: Refusal = Refusal.RECIPIENT


@dataclass(frozen=True, slots=True)
class PollResult:
    status: int
    body: dict[str, Any] = field(default_factory=dict)
    retry_after: str | None = None
    server_date: str | None = None


@dataclass(frozen=True, slots=True)
class LookupResult:
    """A provider's answer to "did you accept the send of this operation?"."""

    status: int  # 200 when the provider answered the question
    message_id: str = ""  # "" = not found (trust it only as far as LookupTrust says)
    retry_after: str | None = None
    server_date: str | None = None


class ProviderUnavailable(RuntimeError):
    """A polling call failed at the transport level (refused, timed out, reset)."""


class Provider(Protocol):
    """What the sender and the poller need from an adapter."""

    name: str
    capabilities: Capabilities

    async def send(self, operation_id: str, message: Message) -> SendResult: ...

    async def lookup(self, operation_id: str) -> LookupResult: ...

    async def max_send_rate(self) -> float | None:
        """The account's maximum send rate (sends/s) where the provider reports one."""
        ...


@dataclass(frozen=True, slots=True)
class Answer:
    """One HTTP answer, read within bounds."""

    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> dict[str, Any]:
        return json_object(self.body)

    def rate(self) -> RateSignal | None:
        return from_headers(self.headers, time.time())


class Http:
    """One adapter's HTTP side: session, timeouts, and the no-redirect rule."""

    def __init__(
        self, session: aiohttp.ClientSession, provider: str, connect: float, total: float
    ) -> None:
        self.session = session
        self.provider = provider
        self.timeout = aiohttp.ClientTimeout(total=total, connect=connect, sock_read=total)

    async def request(
        self, method: str, url: str, *, limit: int = MAX_BODY, **kwargs: Any
    ) -> Answer:
        """The answer; raises aiohttp.ClientError / TimeoutError on transport failures."""
        async with self.session.request(
            method, url, allow_redirects=False, timeout=self.timeout, **kwargs
        ) as response:
            body = await read_bounded(response, limit)
            if 300 <= response.status < 400:
                metrics.provider_redirects.labels(self.provider, method).inc()
            return Answer(response.status, response.headers, body)

    async def send(
        self, url: str, read: Callable[[Answer], SendResult], **kwargs: Any
    ) -> SendResult:
        """A send's POST, its answer read by ``read``; a transport failure is the send not
        made or lost (:func:`transport_failure`)."""
        try:
            answer = await self.request("POST", url, **kwargs)
        except (aiohttp.ClientError, TimeoutError) as error:
            return transport_failure(error)
        return read(answer)

    async def ask(self, method: str, url: str, **kwargs: Any) -> Answer:
        """A lookup or poll: transport failures become ProviderUnavailable."""
        try:
            return await self.request(method, url, limit=MAX_BODY * 16, **kwargs)
        except (aiohttp.ClientError, TimeoutError) as error:
            raise ProviderUnavailable(type(error).__name__) from None


Row = dict[str, Any]


def first_id(
    rows: object, ours: Callable[[Row], bool], id_of: Callable[[Row], object], what: str
) -> str:
    """The message id of the first row that is about our operation ("" when none): a row
    about anything else proves nothing. A malformed list is an unusable answer."""
    if not isinstance(rows, list):
        raise ProviderUnavailable(f"lookup answered without {what}")
    for row in rows:
        if isinstance(row, dict) and ours(row):
            found = message_id(id_of(row))
            if found:
                return found
    return ""


def send_answer(
    answer: Answer,
    success: frozenset[int],
    accepted: Callable[[Answer], SendResult],
    refused: Callable[[Answer], SendResult],
) -> SendResult:
    """A send's answer as every adapter reads it: a 3xx is never followed, a documented
    success (``success``) is ``accepted``'s to read, any other 2xx is ambiguous, and the rest
    is ``refused``'s."""
    status = answer.status
    if redirect(status):
        return redirected(status)
    if status in success:
        return accepted(answer)
    if 200 <= status < 300:
        return undocumented_success(status)
    return refused(answer)


def advised(
    answer: Answer,
    outcome: Outcome,
    reason: str = "",
    *,
    rate: bool = False,
    refusal: Refusal = Refusal.RECIPIENT,
) -> SendResult:
    """The answer as ``outcome``, with the wait it advises (``Retry-After``), its ``Date`` and,
    where the provider sends them (``rate``), its rate headers for the pacer."""
    return SendResult(
        outcome,
        answer.status,
        reason=reason,
        retry_after=answer.headers.get("Retry-After"),
        server_date=answer.headers.get("Date"),
        rate=answer.rate() if rate else None,
        refusal=refusal,
    )


def redirect(status: int) -> bool:
    return 300 <= status < 400


def redirected(status: int) -> SendResult:
    """A 3xx: never followed and never "accepted". Transient, since a misconfigured proxy
    or base URL is the likely cause; counted, so on-call sees it."""
    return SendResult(Outcome.TRANSIENT, status, reason="redirect_not_followed")


def undocumented_success(status: int) -> SendResult:
    """A 2xx the provider does not document for a send: it may have sent, or not.
    Reconcile (look up / wait for events), never retry blindly."""
    return SendResult(Outcome.AMBIGUOUS, status, reason=f"undocumented_{status}")


def server_error(status: int) -> SendResult:
    """A 5xx (or a 408) to a send of a provider without an idempotency key. The request body
    was written, and no provider documents that an answer in its own error shape means the
    mail was not taken: a provider may take the mail and still answer 500 ``{"errors": …}``.
    Whatever the body says, the answer proves nothing about acceptance: ambiguous, settled by
    lookup, events or review, never by a blind resend."""
    return SendResult(Outcome.AMBIGUOUS, status, reason=f"unproven_{status}")


def recipient_refused(status: int, reason: str) -> SendResult:
    """A refusal the provider documents as about this one recipient: the operation fails."""
    return SendResult(Outcome.PERMANENT, status, reason=reason, refusal=Refusal.RECIPIENT)


def undocumented_refusal(status: int, reason: str) -> SendResult:
    """A refusal no page of the provider explains: the operation waits (not failed) and the
    refusals guard counts it."""
    return SendResult(Outcome.PERMANENT, status, reason=reason, refusal=Refusal.UNDOCUMENTED)


def account_refused(status: int, reason: str, detail: str) -> SendResult:
    """A documented answer about our side — key, account, sender identity, domain, endpoint
    or configuration — not one address: every send would be refused alike, so the provider
    pauses at the first one, ``detail`` (the provider's words) in the pause; operations stay
    queued, attempt refunded, a page."""
    return SendResult(Outcome.AUTH, status, reason=reason, pause="account", detail=detail)


def before_write(error: BaseException) -> bool:
    """True when the request never reached the provider (connect refused/timed out)."""
    return isinstance(error, aiohttp.ClientConnectorError | aiohttp.ConnectionTimeoutError)


def transport_failure(error: BaseException) -> SendResult:
    if before_write(error):
        return SendResult(Outcome.TRANSIENT, reason=f"not_sent:{type(error).__name__}")
    return SendResult(Outcome.AMBIGUOUS, reason=f"lost:{type(error).__name__}")


async def read_bounded(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """The whole body if it fits in ``limit`` bytes, else b"" (treated as unreadable).

    ``content.read(n)`` returns whatever has arrived so far, so a body split across
    segments must be read to the end; the request's timeouts bound a body that drips.
    """
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(16 * 1024):
        size += len(chunk)
        if size > limit:
            return b""
        chunks.append(chunk)
    return b"".join(chunks)


def json_object(raw: bytes) -> dict[str, Any]:
    try:
        value = codec.loads(raw)
    except codec.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def message_id(value: object) -> str:
    """A provider's message id if it has the shape the store keeps, else "" (an answer that
    names a message by anything else is treated as naming none)."""
    return value if isinstance(value, str) and valid_provider_message_id(value) else ""


def poll_result(answer: Answer) -> PollResult:
    body = answer.json() if answer.status == 200 else {}
    return PollResult(
        answer.status, body, answer.headers.get("Retry-After"), answer.headers.get("Date")
    )


def lookup_answer(answer: Answer, find: Callable[[Row], str]) -> LookupResult:
    """A lookup's answer: the message id ``find`` reads in a 200's body ("" when none); any
    other status answered nothing."""
    found = find(answer.json()) if answer.status == 200 else ""
    return LookupResult(
        answer.status, found, answer.headers.get("Retry-After"), answer.headers.get("Date")
    )

"""The ``http`` provider adapter: docs/provider-contract.md over one reused aiohttp session.

Every call has explicit connect and total timeouts and a bounded response read. A send
failure is classified by *when* it happened: before the request was written (safe to
retry) or after (ambiguous: the provider may have accepted it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import aiohttp

from shared import codec
from shared.model import Outcome
from shared.rate_signal import RateSignal

MAX_BODY = 64 * 1024
_PERMANENT = {400, 404, 413, 422}
_AUTH = {401, 403}


@dataclass(frozen=True, slots=True)
class SendResult:
    outcome: Outcome
    status: int = 0
    message_id: str = ""
    replayed: bool = False
    retry_after: str | None = None
    server_date: str | None = None
    reason: str = ""
    rate: RateSignal | None = None  # X-RateLimit-* and the like, for the pacer


@dataclass(frozen=True, slots=True)
class PollResult:
    status: int
    body: dict[str, Any] = field(default_factory=dict)
    retry_after: str | None = None
    server_date: str | None = None


class ProviderUnavailable(RuntimeError):
    """A polling call failed at the transport level (refused, timed out, reset)."""


def classify_status(status: int) -> Outcome:
    if status in (200, 202):
        return Outcome.ACCEPTED
    if status == 429:
        return Outcome.THROTTLED
    if status in _AUTH:
        return Outcome.AUTH
    if status == 409 or status == 408 or status >= 500:
        return Outcome.TRANSIENT  # 409: the same key is still in flight at the provider
    return Outcome.PERMANENT if status in _PERMANENT or 400 <= status < 500 else Outcome.TRANSIENT


def _before_write(error: BaseException) -> bool:
    """True when the request never reached the provider (connect refused/timed out)."""
    return isinstance(error, aiohttp.ClientConnectorError | aiohttp.ConnectionTimeoutError)


class HttpProvider:
    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        api_key: str,
        *,
        connect_timeout: float = 3.0,
        total_timeout: float = 15.0,
    ) -> None:
        self.session = session
        self.base_url = base_url.rstrip("/")
        self._auth = {"Authorization": f"Bearer {api_key}"}
        self.timeout = aiohttp.ClientTimeout(
            total=total_timeout, connect=connect_timeout, sock_read=total_timeout
        )

    async def send(self, operation_id: str, message: dict[str, Any]) -> SendResult:
        headers = {
            **self._auth,
            "Content-Type": "application/json",
            "Idempotency-Key": operation_id,
        }
        try:
            async with self.session.post(
                self.base_url + "/email/send",
                data=codec.dumps(message),
                headers=headers,
                timeout=self.timeout,
            ) as response:
                body = await read_bounded(response, MAX_BODY)
                return _send_result(response, body)
        except (aiohttp.ClientError, TimeoutError) as error:
            if _before_write(error):
                return SendResult(Outcome.TRANSIENT, reason=f"not_sent:{type(error).__name__}")
            return SendResult(Outcome.AMBIGUOUS, reason=f"lost:{type(error).__name__}")

    async def _get(self, path: str, params: dict[str, str]) -> PollResult:
        try:
            async with self.session.get(
                self.base_url + path, params=params, headers=self._auth, timeout=self.timeout
            ) as response:
                raw = await read_bounded(response, MAX_BODY * 16)
                body = _json_object(raw) if response.status == 200 else {}
                return PollResult(
                    response.status,
                    body,
                    response.headers.get("Retry-After"),
                    response.headers.get("Date"),
                )
        except (aiohttp.ClientError, TimeoutError) as error:
            raise ProviderUnavailable(type(error).__name__) from None

    async def lookup(self, idempotency_key: str) -> PollResult:
        return await self._get("/email/messages", {"idempotency_key": idempotency_key})

    async def message(self, message_id: str) -> PollResult:
        """One message with its events (the poller asks after reconciling an ambiguous send,
        whose events the feed may have shown before the operation knew its message id)."""
        return await self._get("/email/messages/" + quote(message_id, safe=""), {})

    async def events(self, after: str, limit: int) -> PollResult:
        params = {"limit": str(limit)}
        if after:
            params["after"] = after
        return await self._get("/email/events", params)


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


def _json_object(raw: bytes) -> dict[str, Any]:
    try:
        value = codec.loads(raw)
    except codec.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _send_result(response: aiohttp.ClientResponse, body: bytes) -> SendResult:
    outcome = classify_status(response.status)
    retry_after = response.headers.get("Retry-After")
    date = response.headers.get("Date")
    if outcome is not Outcome.ACCEPTED:
        return SendResult(outcome, response.status, retry_after=retry_after, server_date=date)
    message_id = _json_object(body).get("id")
    if not isinstance(message_id, str) or not message_id or len(message_id) > 256:
        # Accepted, but we cannot tell by what id: reconcile by key instead of guessing.
        return SendResult(Outcome.AMBIGUOUS, response.status, reason="accepted_without_id")
    replayed = response.headers.get("Idempotent-Replayed", "").lower() == "true"
    return SendResult(outcome, response.status, message_id, replayed)

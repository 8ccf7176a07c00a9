"""The ``http`` adapter: the poll-only contract of docs/provider-contract.md (the sandbox).

Send ``POST {base}/email/send`` with ``Idempotency-Key``; look a key up with
``GET {base}/email/messages?idempotency_key=``; read events from ``GET {base}/email/events``.
"""

from __future__ import annotations

from urllib.parse import quote

import aiohttp

from shared import codec
from shared.model import Outcome
from shared.providers import base
from shared.providers.kind import Kind, ProviderConfig

# docs/provider-contract.md: 422 refuses the recipient; 400, 404, 413 our request or endpoint.
_RECIPIENT = 422
_OURS = frozenset({400, 404, 413})
_AUTH = frozenset({401, 403})
SUCCESS = frozenset({200, 202})


def capabilities(key_retention_seconds: float) -> base.Capabilities:
    return base.Capabilities(
        idempotency_key="Idempotency-Key",
        idempotency_retention_seconds=key_retention_seconds,
        # The lookup is by key, so it sees exactly what the key's retention keeps: the
        # contract (docs/provider-contract.md) makes its "not found" a proof.
        lookup=base.LookupTrust(
            0.0, key_retention_seconds, "GET /email/messages?idempotency_key=", proves_absence=True
        ),
        rate_signals=frozenset({base.RateSignalKind.RETRY_AFTER}),
        events=base.EventModel.POLL,
        max_message_bytes=256 * 1024,
        max_recipients=50,
        success_statuses=SUCCESS,
    )


def classify_status(status: int) -> Outcome:
    """The outcome class of a send's status, for every status but the 2xx and 3xx."""
    if status == 429:
        return Outcome.THROTTLED
    if status in _AUTH:
        return Outcome.AUTH
    if status == 409 or status == 408 or status >= 500:
        return Outcome.TRANSIENT  # 409: the same key is still in flight at the provider
    return Outcome.PERMANENT if 400 <= status < 500 else Outcome.TRANSIENT


def refused(answer: base.Answer) -> base.SendResult:
    """A refusal, by whose it is (shared.providers.base.Refusal)."""
    status = answer.status
    outcome = classify_status(status)
    if outcome is Outcome.PERMANENT and status == _RECIPIENT:
        return base.recipient_refused(status, f"http_{status}")
    if outcome is Outcome.PERMANENT and status in _OURS:
        words = str(answer.json().get("message") or f"HTTP {status}")
        return base.account_refused(status, f"http_{status}", words)
    if outcome is Outcome.PERMANENT:
        return base.undocumented_refusal(status, f"http_{status}")
    return base.advised(answer, outcome, rate=True)


def send_result(answer: base.Answer) -> base.SendResult:
    return base.send_answer(answer, SUCCESS, accepted, refused)


def accepted(answer: base.Answer) -> base.SendResult:
    found = base.message_id(answer.json().get("id"))
    if not found:
        # Accepted, but we cannot tell by what id: reconcile by key instead of guessing.
        return base.SendResult(Outcome.AMBIGUOUS, answer.status, reason="accepted_without_id")
    replayed = answer.headers.get("Idempotent-Replayed", "").lower() == "true"
    return base.SendResult(Outcome.ACCEPTED, answer.status, found, replayed, rate=answer.rate())


def found_message_id(body: dict[str, object], key: str) -> str:
    """The id of the row whose key is exactly ours ("" when none): a row for another key
    proves nothing about this operation."""
    return base.first_id(
        body.get("data"),
        lambda row: row.get("idempotency_key") == key,
        lambda row: row.get("id"),
        "a data list",
    )


class HttpProvider:
    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        api_key: str,
        *,
        connect_timeout: float = 3.0,
        total_timeout: float = 15.0,
        key_retention_seconds: float = 86400.0,
        name: str = "http",
    ) -> None:
        self.name = name
        self.http = base.Http(session, name, connect_timeout, total_timeout)
        self.base_url = base_url.rstrip("/")
        self._auth = {"Authorization": f"Bearer {api_key}"}
        self.capabilities = capabilities(key_retention_seconds)

    async def send(self, operation_id: str, message: base.Message) -> base.SendResult:
        headers = {
            **self._auth,
            "Content-Type": "application/json",
            "Idempotency-Key": operation_id,
        }
        url = self.base_url + "/email/send"
        return await self.http.send(url, send_result, data=codec.dumps(message), headers=headers)

    async def _get(self, path: str, params: dict[str, str]) -> base.Answer:
        return await self.http.ask("GET", self.base_url + path, params=params, headers=self._auth)

    async def lookup(self, operation_id: str) -> base.LookupResult:
        answer = await self._get("/email/messages", {"idempotency_key": operation_id})
        return base.lookup_answer(answer, lambda body: found_message_id(body, operation_id))

    async def message(self, message_id: str) -> base.PollResult:
        """One message with its events (the poller asks after reconciling an ambiguous send,
        whose events the feed may have shown before the operation knew its message id)."""
        return base.poll_result(
            await self._get("/email/messages/" + quote(message_id, safe=""), {})
        )

    async def events(self, after: str, limit: int) -> base.PollResult:
        params = {"limit": str(limit)}
        if after:
            params["after"] = after
        return base.poll_result(await self._get("/email/events", params))

    async def max_send_rate(self) -> float | None:
        return None  # the contract has no account-quota route


def _adapter(config: ProviderConfig, session: aiohttp.ClientSession) -> HttpProvider:
    return HttpProvider(
        session,
        config.url,
        config.api_key,
        name=config.name,
        key_retention_seconds=config.key_retention_seconds,
        **config.timeouts,
    )


# The sandbox's own routes speak the contract (services/sandbox/provider.py) and the poller
# reads its feed (services/poller/feed.py): no dialect, no pushed events.
KIND = Kind(
    "http",
    _adapter,
    lambda config: capabilities(config.key_retention_seconds),
    service_settings=("idempotency_window_seconds",),
)

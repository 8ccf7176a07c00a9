"""Settings of the sandbox provider (env prefix ``RESETGATE_SANDBOX_``).

Every field except ``host`` and ``port`` can also be changed while the server runs,
through ``POST /_sandbox/config``, so a test can flip faults without a restart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.providers.registry import SANDBOX_MODES
from shared.settings import one_of

RetryAfterForm = Literal[
    "delay-seconds", "imf-fixdate", "rfc850", "asctime", "absent", "malformed", "rotate"
]

Probability = Field(default=0.0, ge=0.0, le=1.0)
EveryNth = Field(default=0, ge=0)

# Fields that only matter when the listening socket and routes are created.
STARTUP_ONLY = frozenset({"host", "port", "mode", "messages_file"})
MODES = SANDBOX_MODES  # the http contract and each kind whose entry names a dialect


@dataclass(frozen=True, slots=True)
class Schedule:
    """Piecewise-constant values: ``(value, seconds)`` phases, the last one open-ended; the
    form of ``send_rate_schedule`` and ``send_shared_quota`` (ratelimit.py runs them)."""

    phases: tuple[tuple[float, float], ...]
    last: float

    @classmethod
    def parse(cls, text: str, *, below: float | None = None) -> Schedule:
        """``"100:20,50:20,100"``; raises ``ValueError`` with a message a caller can act on.

        Rates (``below`` None) must be above 0; shares must be at least 0 and under ``below``.
        """
        parts = [part.strip() for part in text.split(",")]
        phases = []
        for part in parts[:-1]:
            value, sep, seconds = part.partition(":")
            if not sep:
                raise ValueError(f"phase {part!r} needs value:seconds (only the last is open)")
            phases.append((_value(value, part, below), _number(seconds, part)))
        if ":" in parts[-1]:
            raise ValueError(f"the last phase {parts[-1]!r} is open-ended: a value, no seconds")
        return cls(tuple(phases), _value(parts[-1], parts[-1], below))

    @classmethod
    def constant(cls, value: float) -> Schedule:
        return cls((), value)

    def at(self, elapsed: float) -> float:
        for value, seconds in self.phases:
            if elapsed < seconds:
                return value
            elapsed -= seconds
        return self.last


def _number(text: str, part: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{part!r}: {text!r} is not a number") from None
    if not 0 < value < float("inf"):
        raise ValueError(f"{part!r}: {text!r} must be a finite number above 0")
    return value


def _value(text: str, part: str, below: float | None) -> float:
    if below is None:
        return _number(text, part)
    value = _number(text, part) if text.strip() not in ("0", "0.0") else 0.0
    if value >= below:
        raise ValueError(f"{part!r}: {text!r} must be under {below}")
    return value


class SandboxSettings(BaseSettings):
    """Configuration of one sandbox provider process; state lives in memory only."""

    model_config = SettingsConfigDict(env_prefix="RESETGATE_SANDBOX_", extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(default=8090, ge=0, le=65535)
    log_level: str = "INFO"
    # Which provider's API the sandbox speaks: the http contract, or SendGrid, Postmark or
    # Mailgun as their documentation describes them (services/sandbox/dialects/).
    mode: str = "http"

    # Credentials: the one bearer key accepted, and a switch that simulates a revoked key.
    api_key: SecretStr = SecretStr("sandbox-key")
    revoked_status: int = 0  # 401 or 403: every call answers it, even with the right key

    # Idempotency-Key dedupe window; lookups by key see the same retention.
    idempotency_window_seconds: float = Field(default=86400.0, gt=0)

    # Token buckets (0 = unlimited). Polling routes share one bucket of their own.
    send_rate_per_second: float = Field(default=0.0, ge=0)
    send_burst: int = Field(default=10, ge=1)
    # "100:20,50:20,100": sends/s for 20 s, then 50/s for 20 s, then 100/s; the clock starts
    # at the first send. Overrides send_rate_per_second when set.
    send_rate_schedule: str = ""
    # "0.3:10,0.6:10,0": another sender takes this share of the send rate for 10 s, then
    # this share, ... (the same clock): a quota shared with the studio's other mail.
    send_shared_quota: str = ""
    # Every send answers 429 for this long from the first send (then the bucket decides):
    # a provider-wide throttle that states no wait with retry_after_form "absent".
    send_blackout_seconds: float = Field(default=0.0, ge=0, le=86400)
    poll_rate_per_second: float = Field(default=0.0, ge=0)
    poll_burst: int = Field(default=10, ge=1)
    retry_after_form: RetryAfterForm = "delay-seconds"

    # Status of an accepted send: the contract allows both.
    accepted_status: int = 200
    max_body_bytes: int = Field(default=256 * 1024, ge=1024)

    # The inbox page (/_sandbox/inbox) shows beside each email what resetgate says of its
    # operation, asked from admission's internal API here (`resetgate up` sets both).
    inbox_resetgate_url: str = ""
    inbox_resetgate_token: SecretStr = SecretStr("")

    # Delivery events.
    delivered_delay_seconds: float = Field(default=1.0, ge=0)
    bounce_domain: str = ""  # recipients here get "bounced" instead of "delivered"
    complaint_domain: str = ""  # recipients here get "delivered", then "complained"
    reject_domain: str = ""  # sends to recipients here answer 422
    # A provider mode's documented refusal of the whole account or domain (names in each
    # dialect's ``refusals``, e.g. Mailgun's "domain_not_found"): every send answers it.
    refusal: str = ""
    # Postmark mode: a send appears in the outbound search only this long after it was
    # taken (Postmark documents no such delay; 0 = at once).
    search_delay_seconds: float = Field(default=0.0, ge=0)
    # Provider modes: the hosted templates this account has (comma-separated ids, aliases
    # or names). A send naming another is answered as that provider answers a missing one.
    templates: str = ""
    # Provider modes' account (services/sandbox/account.py, what the preflight reads): its
    # verified sending domains, those added but not verified, the key's scopes (SendGrid)
    # and the server's type (Postmark: "Sandbox" accepts and delivers nothing).
    domains: str = "game.example,mg.game.example,studio.example"
    unverified_domains: str = ""
    key_scopes: str = "mail.send,whitelabel.read"
    server_delivery_type: Literal["Live", "Sandbox"] = "Live"
    # Provider modes: POST each message's events here as the provider would
    # (services/sandbox/webhooks.py); "" = the events are only in the feed. Postmark's
    # basic-auth credentials go in the URL, as Postmark documents (https://user:pass@host/...).
    webhook_url: str = ""
    webhook_signing_key: SecretStr = SecretStr("")  # Mailgun's HTTP webhook signing key
    # Every wait of the provider's documented webhook retry schedule is multiplied by this
    # (1 = the provider's own minutes and hours; 0.001 makes Mailgun's first 5 minutes 0.3 s).
    webhook_retry_scale: float = Field(default=1.0, gt=0, le=1)

    # Fault injection: each fault fires with a probability, on every Nth eligible
    # request, or both. The RNG is seeded by ``seed`` so a run can be replayed.
    seed: int | None = None
    error_probability: float = Probability
    error_every: int = EveryNth
    error_status: int = Field(default=503, ge=500, le=599)
    slow_probability: float = Probability
    slow_every: int = EveryNth
    slow_seconds: float = Field(default=2.0, ge=0)
    drop_probability: float = Probability
    drop_every: int = EveryNth
    # The email is recorded, then a gateway in front of the provider answers ``error_status``
    # with its own page (no provider error body): the client cannot tell it was sent.
    late_error_probability: float = Probability
    late_error_every: int = EveryNth
    # "provider": the late answer is instead the provider mode's own documented error body
    # (SendGrid's {"errors": […]}, Postmark's {"ErrorCode", "Message"}, Mailgun's
    # {"message"}): a provider that took the mail and still answered an error, which no
    # provider page rules out. ``late_error_status`` (0 = ``error_status``) may be 408.
    late_error_shape: Literal["gateway", "provider"] = "gateway"
    late_error_status: int = Field(default=0, ge=0, le=599)
    duplicate_event_probability: float = Probability
    duplicate_event_every: int = EveryNth
    out_of_order_probability: float = Probability
    out_of_order_every: int = EveryNth
    poll_error_probability: float = Probability
    poll_error_every: int = EveryNth

    # Keep the messages across a restart in this file (services/sandbox/keep.py); "" = in
    # memory only. `resetgate up` sets it; the chart never does.
    messages_file: str = ""

    # Memory bounds: the oldest messages/events are forgotten past these caps.
    max_messages: int = Field(default=100_000, ge=1)
    max_events: int = Field(default=200_000, ge=1)
    max_tracked_keys: int = Field(default=200_000, ge=1)

    @field_validator("mode")
    @classmethod
    def _mode_known(cls, value: str) -> str:
        return one_of(value, MODES)

    @field_validator("send_rate_schedule", "send_shared_quota")
    @classmethod
    def _schedule(cls, value: str, info: ValidationInfo) -> str:
        if value.strip():
            below = 1.0 if info.field_name == "send_shared_quota" else None
            Schedule.parse(value, below=below)  # ValueError names the bad phase
        return value.strip()

    @field_validator("revoked_status")
    @classmethod
    def _auth_status(cls, value: int) -> int:
        # Ints, not Literal: environment values arrive as strings and must still coerce.
        if value not in (0, 401, 403):
            raise ValueError("must be 0 (off), 401 or 403")
        return value

    @field_validator("accepted_status")
    @classmethod
    def _accept_status(cls, value: int) -> int:
        if value not in (200, 202):
            raise ValueError("must be 200 or 202")
        return value

    @field_validator("bounce_domain", "complaint_domain", "reject_domain")
    @classmethod
    def _lower_domain(cls, value: str) -> str:
        return value.strip().lower()

    def public_view(self) -> dict[str, object]:
        """Every setting except the key, for the control and stats routes."""
        return self.model_dump(mode="json", exclude={"api_key"})

    def updated(self, changes: dict[str, object]) -> SandboxSettings:
        """A validated copy with ``changes`` applied (raises ``ValueError`` on bad input)."""
        fixed = STARTUP_ONLY.intersection(changes)
        if fixed:
            raise ValueError(f"not changeable at runtime: {', '.join(sorted(fixed))}")
        merged: dict[str, object] = dict(self)
        merged.update(changes)
        # Init kwargs take precedence over the environment, and every field is given here.
        return SandboxSettings.model_validate(merged)

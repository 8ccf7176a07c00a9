"""Poller configuration (RESETGATE_*)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import (
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    SecretStr,
    field_validator,
    model_validator,
)

from shared.clock import InMs
from shared.providers.registry import KINDS
from shared.settings import (
    METRICS_PORTS,
    ConsumerSettings,
    KindSettings,
    PolicySettings,
    ProviderSettings,
    _Env,
    read_kind,
)

# The kinds whose events are pushed, and what each is read with (its registry entry's
# inbound_settings class, declared in its own module).
PUSHED = {k.name: k.inbound_settings for k in KINDS.values() if k.event_credential}


class PushedEventsSettings(_Env):
    """Pushed events (docs/providers.md, "Delivery events"): the webhook listener, and what
    each pushed kind's events are read with (its registry entry's ``inbound_settings``)."""

    # The webhook listener has its own port, never admission's; it starts when at least one
    # provider's credential is set, and a provider without one answers 404.
    webhook_port: int = Field(default=8085, ge=1, le=65535)
    webhook_max_body_bytes: int = Field(default=2 * 1024 * 1024, ge=1024, le=32 * 1024 * 1024)
    # A signed timestamp further than this from our clock is refused (replay or broken clock).
    webhook_max_age_seconds: int = Field(default=300, ge=10, le=86_400)
    # Each pushed kind's credentials and queue (its inbound_settings, read under this prefix:
    # RESETGATE_SENDGRID_WEBHOOK_PUBLIC_KEY ...); a configured name's own are read by
    # services/poller/inbound/sources.py.
    _inbound: dict[str, KindSettings] = PrivateAttr(default_factory=dict)

    def inbound(self, kind: str) -> KindSettings:
        """What kind ``kind``'s pushed events are read with, as set for the kind (its
        ``inbound_settings`` class; the class's defaults for a polled kind)."""
        return self._inbound.get(kind) or KindSettings()

    @model_validator(mode="wrap")
    @classmethod
    def _inbound_read(
        cls, data: Any, handler: ModelWrapValidatorHandler[PushedEventsSettings]
    ) -> PushedEventsSettings:
        # A kind's inbound setting given as a keyword (as the environment would give it)
        # goes to its kind's class, read under the same prefix.
        given = data if isinstance(data, dict) else {}
        settings = handler(data)
        for kind, own in PUSHED.items():
            mine = {name: value for name, value in given.items() if name in own.model_fields}
            settings._inbound[kind] = read_kind(own, given=mine)
        return settings


class PollerSettings(PolicySettings, ProviderSettings, ConsumerSettings, PushedEventsSettings):
    metrics_port: int = Field(default=METRICS_PORTS["poller"], ge=0, le=65535)
    # The poller never derives a token (a replay reuses the operation; the sender derives
    # its token), so it neither needs nor checks RESETGATE_TOKEN_KEYS.
    token_keys: SecretStr = SecretStr("")
    # How stale the support view of delivery may get: the pause between feed polls once
    # the feed is drained (a full page is followed at once, within the budget). Lag is about
    # half of it on average and all of it at worst (docs/poller-router.md, "Choosing").
    poll_interval_seconds: float = Field(default=2.0, gt=0, le=3600)
    poll_batch: int = Field(default=1000, ge=1, le=1000)
    # Every provider call the poller makes (feed, lookups, message reads) spends this
    # budget; the provider counts its polling routes against one bucket too. 300 a minute
    # follows a burst of 5,000 events/s with 1,000-event pages.
    poll_max_requests_per_minute: int = Field(default=300, ge=1, le=60_000)
    poll_burst: int = Field(default=10, ge=1, le=1000)
    # A 429 without a usable Retry-After, or an unreachable provider: capped backoff.
    poll_backoff_cap_seconds: float = Field(default=60.0, gt=0)
    # How soon a new ambiguous attempt is asked about (a key's retention may be short).
    reconcile_interval_seconds: float = Field(default=1.0, gt=0)
    # The longest one operation whose lookup keeps failing is left alone (its wait doubles
    # per failure from the interval above).
    reconcile_backoff_cap_seconds: float = Field(default=300.0, gt=0)
    close_interval_seconds: float = Field(default=5.0, gt=0)
    # Events whose message no operation knows yet (the sender has not finalised, or the
    # attempt is still ambiguous) are retried for this long before they are dropped.
    orphan_hold_seconds: float = Field(default=120.0, ge=0)
    orphan_max: int = Field(default=10_000, ge=0)
    gc_interval_seconds: float = Field(default=60.0, gt=0)
    lease_seconds: float = Field(default=15.0, ge=1)
    # With work waiting on the provider and no events page or lookup succeeding for this
    # long, the lease holder says it is not ready (and PollerStalled pages).
    poll_stall_seconds: float = Field(default=600.0, ge=1)

    lease_ms: ClassVar[InMs] = InMs()

    @field_validator("token_keys")
    @classmethod
    def _token_keys_parse(cls, value: SecretStr) -> SecretStr:
        return value  # overrides PolicySettings' check: see token_keys above

"""Poller configuration (RESETGATE_*)."""

from __future__ import annotations

import os
import socket

from pydantic import Field, SecretStr, field_validator

from shared.settings import ProviderSettings


class PollerSettings(ProviderSettings):
    # The poller never derives a token (a replay reuses the operation; the sender derives
    # its token), so it neither needs nor checks RESETGATE_TOKEN_KEYS.
    token_keys: SecretStr = SecretStr("")
    total_timeout_seconds: float = Field(default=10.0, gt=0)
    # How stale the support view of delivery may get: the pause between feed polls once
    # the feed is drained (a full page is followed at once, within the budget).
    poll_interval_seconds: float = Field(default=5.0, gt=0, le=3600)
    poll_batch: int = Field(default=500, ge=1, le=1000)
    # Every provider call the poller makes (feed, lookups, message reads) spends this
    # budget; the provider counts its polling routes against one bucket too.
    poll_max_requests_per_minute: int = Field(default=120, ge=1, le=60_000)
    poll_burst: int = Field(default=10, ge=1, le=1000)
    # A 429 without a usable Retry-After, or an unreachable provider: capped backoff.
    poll_backoff_cap_seconds: float = Field(default=60.0, gt=0)
    # How soon a new ambiguous attempt is asked about (a key's retention may be short).
    reconcile_interval_seconds: float = Field(default=1.0, gt=0)
    close_interval_seconds: float = Field(default=5.0, gt=0)
    # Events whose message no operation knows yet (the sender has not finalised, or the
    # attempt is still ambiguous) are retried for this long before they are dropped.
    orphan_hold_seconds: float = Field(default=120.0, ge=0)
    orphan_max: int = Field(default=10_000, ge=0)
    gc_interval_seconds: float = Field(default=60.0, gt=0)
    lease_seconds: float = Field(default=15.0, ge=1)
    consumer_name: str = Field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")

    @field_validator("token_keys")
    @classmethod
    def _token_keys_parse(cls, value: SecretStr) -> SecretStr:
        return value  # overrides PolicySettings' check: see token_keys above

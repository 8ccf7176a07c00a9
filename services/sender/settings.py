"""Sender configuration (RESETGATE_*)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, model_validator

from shared.clock import InMs
from shared.settings import (
    METRICS_PORTS,
    ConsumerSettings,
    DirectorySettings,
    EmailSettings,
    PolicySettings,
    ProgressiveSettings,
    ProviderSettings,
    ReplicationSettings,
)


class SenderSettings(
    PolicySettings,
    ProviderSettings,
    DirectorySettings,
    ConsumerSettings,
    ReplicationSettings,
    EmailSettings,
    ProgressiveSettings,
):
    metrics_port: int = Field(default=METRICS_PORTS["sender"], ge=0, le=65535)
    provider_min_rate: float = Field(
        default=0.05,
        gt=0,
        description="sends/s the pacing never cuts under: while a provider refuses every "
        "send, one probe per 1/min_rate seconds (a measured cut settles on the rate the "
        "provider accepts, however low)",
    )
    provider_burst: float = Field(default=5.0, ge=1)
    provider_daily_quota: int = Field(
        default=0,
        ge=0,
        description="sends per quota window through one provider (0: the provider's own, "
        "SES Max24HourSend); when used up, sending through it pauses until the window rolls "
        "over",
    )
    quota_window_seconds: float = Field(
        default=86400.0, gt=0, description="the window a daily quota counts over (SES: 24 h)"
    )
    concurrency: int = Field(default=32, ge=1, le=1024)
    read_batch: int = Field(default=16, ge=1, le=1000)
    lease_seconds: int = Field(default=60, ge=5)
    backoff_base_seconds: float = Field(default=2.0, gt=0)
    backoff_cap_seconds: float = Field(default=300.0, gt=0)
    promote_interval_seconds: float = Field(default=0.25, gt=0)
    # A provider without an idempotency key needs Redis to keep every acknowledged write
    # across a host crash (shared.redis_policy): refuse to start when it says it may not.
    keyless_require_fsync_always: bool = True
    # The same for a failover: with replicas behind the primary, a keyless provider needs
    # every attempt on RESETGATE_WAIT_REPLICAS of them before it is sent (shared.redis_policy).
    keyless_require_replica_wait: bool = True
    # The refusals guard (services/sender/guard.py): this many distinct operations refused
    # permanently for one reason within the window pause the provider (0: off).
    refusal_guard_operations: int = Field(
        default=5,
        ge=0,
        le=1000,
        description="distinct operations refused alike that pause the provider (0: off)",
    )
    refusal_guard_window_seconds: float = Field(
        default=300.0,
        gt=0,
        le=86400,
        description="how recent those refusals must all be, seconds",
    )

    provider_check_interval_seconds: float = Field(
        default=300.0,
        ge=0,
        le=86400,
        description="how often the sender asks each provider what a send would hit "
        "(resetgate providers check; read-only calls); 0: never",
    )
    failover_after_seconds: float = Field(
        default=0.0,
        ge=0,
        description="the failover policy (RESETGATE_FAILOVER_<NAME>): how long a partition "
        "waits with nothing accepted, its oldest eligible operation older than this, before "
        "it fails over; 0: a quarter of the delivery horizon",
    )

    quota_window_ms: ClassVar[InMs] = InMs()
    lease_ms: ClassVar[InMs] = InMs()
    backoff_base_ms: ClassVar[InMs] = InMs()
    backoff_cap_ms: ClassVar[InMs] = InMs()
    refusal_guard_window_ms: ClassVar[InMs] = InMs()

    @model_validator(mode="after")
    def _lease_outlives_a_request(self) -> SenderSettings:
        if self.lease_seconds <= self.total_timeout_seconds + self.connect_timeout_seconds:
            raise ValueError(
                "lease_seconds must exceed total_timeout_seconds + connect_timeout_seconds, "
                "or a live attempt would be taken over as ambiguous"
            )
        if self.provider_min_rate > self.provider_max_rate:
            raise ValueError("provider_min_rate must not exceed provider_max_rate")
        return self

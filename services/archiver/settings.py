"""Archiver configuration (RESETGATE_*)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from shared.clock import InMs
from shared.settings import METRICS_PORTS, ArchiveSettings, CommonSettings, ConsumerSettings


class ArchiverSettings(ArchiveSettings, ConsumerSettings, CommonSettings):
    metrics_port: int = Field(default=METRICS_PORTS["archiver"], ge=0, le=65535)
    # How long an archived operation stays in Redis (the console's recent lists read it
    # there); an operation still observed for delivery stays until its window's end + this.
    archive_tail_seconds: int = Field(default=24 * 3600, ge=1)
    # Partitions (whole months) that ended longer ago than this are dropped.
    archive_retention_days: int = Field(default=400, ge=1)
    archive_batch: int = Field(default=200, ge=1, le=10_000)
    archive_poll_seconds: float = Field(default=0.5, gt=0, le=60)
    # An entry left pending this long (its archiver died mid-batch) is taken over.
    archive_claim_idle_seconds: float = Field(default=30.0, ge=1)
    archive_prune_interval_seconds: float = Field(default=3600.0, ge=1)

    archive_tail_ms: ClassVar[InMs] = InMs()
    archive_claim_idle_ms: ClassVar[InMs] = InMs()

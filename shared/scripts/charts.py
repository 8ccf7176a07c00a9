"""A provider's last hour per minute for on-call's charts (``chart_sample.lua``): what the
pacer already counts (accepted sends, 429s) and the oldest eligible operation's share of its
horizon, sampled into a ring of 60 minutes under the provider's own hash tag."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from shared.keys import provider_minutes, provider_pacing
from shared.scripts import Request, Script, unsent


@dataclass(slots=True, kw_only=True)
class ChartSample(Request[bool]):
    """Count what the provider's totals grew by since the last sample into this minute."""

    SCRIPT = Script("chart_sample")
    KEYS: ClassVar[tuple[str, ...]] = ("pacing", "minutes")

    provider: str = unsent()
    now: int
    oldest: int  # per mille of its horizon used by the oldest eligible operation; -1: none
    max_gap_ms: int
    keep_ms: int

    def keys(self) -> list[str]:
        return [provider_pacing(self.provider), provider_minutes(self.provider)]

    def decode(self, raw: Any) -> bool:
        return bool(int(raw))

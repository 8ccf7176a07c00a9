"""The poller's requests: a delivery event applied to its operation, observation windows
closed, and the single-poller lease."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from shared.keys import POLLER_LEASE
from shared.scripts import Request, Script, unsent


class Applied(StrEnum):
    APPLIED = "applied"
    KEPT = "kept"
    DUPLICATE = "duplicate"
    MISSING = "missing"


@dataclass(slots=True, kw_only=True)
class ApplyDelivery(Request[tuple[Applied, str, str, str, str]]):
    SCRIPT = Script("apply_delivery")
    CODES = Applied
    KEYS = ("operation", "observe", "messages", "settled", "bounced")

    message_id: str
    event_type: str
    occurred_at: int
    now: int
    operation_id: str
    mode: str  # "record": joined by operation id (pushed); "": found through the message map

    def decode(self, raw: Any) -> tuple[Applied, str, str, str, str]:
        # (code, the operation's delivery now, its state as the event found it, the
        # traceparent and tracestate its admission kept)
        return Applied(raw[0]), str(raw[1]), str(raw[2]), str(raw[3]), str(raw[4])


@dataclass(slots=True, kw_only=True)
class CloseObservation(Request[int]):
    SCRIPT = Script("close_observation")
    KEYS = ("observe", "operations...")

    partition: int = unsent()
    now: int
    operation_ids: tuple[str, ...]

    def decode(self, raw: Any) -> int:
        return int(raw)  # how many windows were closed


@dataclass(slots=True, kw_only=True)
class Lease(Request[bool]):
    """Take or renew a single-holder lease (True while ``holder`` has it), or give it up
    (``release``): the single poller's (the default ``key``), the progressive switch's
    driver's (keys.PROGRESSIVE_LEASE)."""

    SCRIPT = Script("lease")
    KEYS = ("lease",)

    holder: str
    lease_ms: int = 0
    release: bool = False
    key: str = dataclasses.field(default=POLLER_LEASE, metadata=unsent().metadata)

    def keys(self) -> list[str]:
        return [self.key]

    def decode(self, raw: Any) -> bool:
        return bool(int(raw))  # True while holder has the lease

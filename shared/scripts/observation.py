"""The poller's requests: a delivery event applied to its operation, observation windows
closed, and the single-poller lease."""

from __future__ import annotations

from dataclasses import InitVar, dataclass
from enum import StrEnum
from typing import Any

from shared.keys import POLLER_LEASE, PartitionKeys
from shared.scripts import Request, Script, key


class Applied(StrEnum):
    APPLIED = "applied"
    KEPT = "kept"
    DUPLICATE = "duplicate"
    MISSING = "missing"


@dataclass(slots=True, kw_only=True)
class ApplyDelivery(Request[tuple[Applied, str, str]]):
    SCRIPT = Script("apply_delivery")
    CODES = Applied

    operation: str = key()
    observe: str = key()
    messages: str = key()
    message_id: str
    event_type: str
    occurred_at: int
    now: int
    operation_id: str
    mode: str  # "record": joined by operation id (pushed); "": found through the message map

    def __post_init__(self) -> None:
        pk = PartitionKeys.of(self.operation_id)
        self.operation, self.observe = pk.operation(self.operation_id), pk.observe
        self.messages = pk.messages

    def decode(self, raw: Any) -> tuple[Applied, str, str]:
        # (code, the operation's delivery now, its state as the event found it)
        return Applied(raw[0]), str(raw[1]), str(raw[2])


@dataclass(slots=True, kw_only=True)
class CloseObservation(Request[int]):
    SCRIPT = Script("close_observation")

    observe: str = key()
    operations: tuple[str, ...] = key()
    partition: InitVar[int]
    now: int
    operation_ids: tuple[str, ...]

    def __post_init__(self, partition: int) -> None:
        pk = PartitionKeys(partition)
        self.observe = pk.observe
        self.operations = tuple(pk.operation(i) for i in self.operation_ids)

    def decode(self, raw: Any) -> int:
        return int(raw)  # how many windows were closed


@dataclass(slots=True, kw_only=True)
class Lease(Request[bool]):
    """Take or renew the single-poller lease (True while ``holder`` has it), or give it up
    (``release``)."""

    SCRIPT = Script("lease")

    lease: str = key()
    holder: str
    lease_ms: int = 0
    release: bool = False

    def __post_init__(self) -> None:
        self.lease = POLLER_LEASE

    def decode(self, raw: Any) -> bool:
        return bool(int(raw))  # True while holder has the lease

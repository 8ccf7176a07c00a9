"""The requests on a partition's send stream: due operations promoted back to it, and the
send jobs a sender holds, renewed while it lives or handed back when it stops."""

from __future__ import annotations

from dataclasses import InitVar, dataclass
from typing import Any

from shared.keys import PartitionKeys
from shared.scripts import Request, Script, key


@dataclass(slots=True, kw_only=True)
class PromoteDue(Request[int]):
    SCRIPT = Script("promote_due")

    due: str = key()
    send: str = key()
    operations: tuple[str, ...] = key()
    partition: InitVar[int]
    now: int
    operation_ids: tuple[str, ...]

    def __post_init__(self, partition: int) -> None:
        pk = PartitionKeys(partition)
        self.due, self.send = pk.due, pk.send
        self.operations = tuple(pk.operation(i) for i in self.operation_ids)

    def decode(self, raw: Any) -> int:
        return int(raw)  # how many were moved to the send stream


@dataclass(slots=True, kw_only=True)
class HandBack(Request[int]):
    SCRIPT = Script("hand_back")

    send: str = key()
    partition: InitVar[int]
    consumer: str
    entry_ids: tuple[str, ...]

    def __post_init__(self, partition: int) -> None:
        self.send = PartitionKeys(partition).send

    def decode(self, raw: Any) -> int:
        return int(raw)  # how many entries were handed back


@dataclass(slots=True, kw_only=True)
class RenewEntries(Request[int]):
    SCRIPT = Script("renew_entries")

    send: str = key()
    partition: InitVar[int]
    consumer: str
    entry_ids: tuple[str, ...]

    def __post_init__(self, partition: int) -> None:
        self.send = PartitionKeys(partition).send

    def decode(self, raw: Any) -> int:
        return int(raw)  # how many entries were renewed

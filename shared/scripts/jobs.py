"""The requests on a partition's send stream: due operations promoted back to it, and the
send jobs a sender holds, renewed while it lives or handed back when it stops."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from shared.scripts import Request, Script, unsent


@dataclass(slots=True, kw_only=True)
class PromoteDue(Request[int]):
    SCRIPT = Script("promote_due")
    KEYS = ("due", "send", "operations...")

    partition: int = unsent()
    now: int
    operation_ids: tuple[str, ...]

    def decode(self, raw: Any) -> int:
        return int(raw)  # how many were moved to the send stream


@dataclass(slots=True, kw_only=True)
class _Entries:
    """What a request about one consumer's send jobs is given: which, on which partition's
    stream; the script answers how many it acted on."""

    KEYS: ClassVar[tuple[str, ...]] = ("send",)

    partition: int = unsent()
    consumer: str
    entry_ids: tuple[str, ...]

    def decode(self, raw: Any) -> int:
        return int(raw)


@dataclass(slots=True, kw_only=True)
class HandBack(_Entries, Request[int]):
    SCRIPT = Script("hand_back")


@dataclass(slots=True, kw_only=True)
class RenewEntries(_Entries, Request[int]):
    SCRIPT = Script("renew_entries")

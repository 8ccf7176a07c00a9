"""The archiver's request: an operation written to PostgreSQL may now expire from Redis."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from shared.scripts import Request, Script, unsent


class Marked(StrEnum):
    ARCHIVED = "archived"
    MOVED = "moved"  # settled again, or live again: no expiry, its new settlement follows
    CHANGED = "changed"  # its delivery changed after it was read: back on the stream
    MISSING = "missing"


@dataclass(slots=True, kw_only=True)
class MarkArchived(Request[Marked]):
    SCRIPT = Script("mark_archived")
    CODES = Marked
    KEYS = ("operation", "ledger", "settled", "observe", "account")

    now: int
    tail_ms: int
    settled_at: str
    delivery_event_at: str
    operation_id: str
    account_id: str = unsent()

    def decode(self, raw: Any) -> Marked:
        return Marked(raw[0])

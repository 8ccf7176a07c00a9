"""The progressive switch's request: a switch recorded only when none is under way."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.keys import PROGRESSIVE
from shared.scripts import Request, Script


@dataclass(slots=True, kw_only=True)
class RecordSwitch(Request[bool]):
    """Record ``plan`` (True), unless the switch on record has not ended (False)."""

    SCRIPT = Script("progressive_request")
    KEYS = ("progressive",)

    plan: str
    ended: str  # ",done,stopped,rolled_back,"

    def keys(self) -> list[str]:
        return [PROGRESSIVE]

    def decode(self, raw: Any) -> bool:
        return bool(int(raw))

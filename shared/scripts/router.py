"""The router's request: a contact-form event claimed for routing, so a redelivered event
never makes a second support case (services/router/cases.py says in what order)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from shared.keys import router_seen
from shared.scripts import Request, Script, unsent


class ClaimCode(StrEnum):
    NEW = "new"
    DONE = "done"
    BUSY = "busy"
    TAKEOVER = "takeover"


@dataclass(frozen=True, slots=True)
class Claim:
    code: ClaimCode
    case_id: str
    claimed_at: int


@dataclass(slots=True, kw_only=True)
class RouteClaim(Request[Claim]):
    SCRIPT = Script("route_claim")
    CODES = ClaimCode
    KEYS = ("seen",)

    event_id: str = unsent()
    case_id: str
    now: int
    ttl_ms: int
    stale_ms: int

    def keys(self) -> list[str]:
        return [router_seen(self.event_id)]

    def decode(self, raw: Any) -> Claim:
        return Claim(ClaimCode(raw[0]), str(raw[1]), int(raw[2]))

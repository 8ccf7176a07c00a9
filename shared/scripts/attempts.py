"""The requests of one operation's life: an attempt begun and finalised, an ambiguous one
settled, an operator's quarantine or release, and the refusals guard's requeue."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from shared.scripts import Request, Script

NOTE_LIMIT = 200  # characters of an operator's or the guard's note kept on the operation


class BeginCode(StrEnum):
    BEGIN = "begin"
    BUSY = "busy"
    SKIP = "skip"
    AMBIGUOUS = "ambiguous"
    EXPIRED = "expired"
    EXHAUSTED = "exhausted"
    MISSING = "missing"
    ELSEWHERE = "elsewhere"  # pinned to another provider (detail: its name); nothing written


@dataclass(frozen=True, slots=True)
class Begun:
    code: BeginCode
    attempts: int = 0
    account_id: str = ""
    token_kid: str = ""
    template_revision: str = ""
    horizon_at: int = 0
    detail: str = ""
    token_expires_at: int = 0  # what the link's expiry tells the player
    # The time the email is composed as of: this attempt's start, or that of an earlier
    # attempt that may have reached the provider (a same-key replay must be the same email).
    body_at: int = 0


@dataclass(slots=True, kw_only=True)
class BeginAttempt(Request[Begun]):
    SCRIPT = Script("begin_attempt")
    CODES = BeginCode
    KEYS = ("operation", "ledger", "send", "ambiguous", "live", "settled", "finished")

    now: int
    attempt_id: str
    lease_ms: int
    max_attempts: int
    consumer: str
    entry_id: str
    retention_ms: int
    operation_id: str
    provider: str = ""

    def decode(self, raw: Any) -> Begun:
        code = BeginCode(raw[0])
        if code is BeginCode.BEGIN:
            return Begun(
                code,
                int(raw[1]),
                raw[2],
                raw[3],
                raw[4],
                int(raw[5]),
                token_expires_at=int(raw[6]),
                body_at=int(raw[7]),
            )
        return Begun(code, detail=str(raw[1]) if len(raw) > 1 else "")


@dataclass(frozen=True, slots=True)
class Finalisation:
    """What one attempt ended as, decided in Python (sender.policy) before the script runs;
    :class:`FinaliseAttempt` sends these fields, in this order."""

    outcome: str
    http_status: int
    next_state: str
    retry_at: int = 0
    reason: str = ""
    retry_after_source: str = ""
    message_id: str = ""
    observe_until: int = 0
    refund: bool = False
    decision: str = ""
    template_revision: str = ""  # what the attempt sent (shared.emails), for the ledger


class FinaliseCode(StrEnum):
    OK = "ok"
    FENCED = "fenced"  # the lease was lost: someone else owns the operation, nothing written


@dataclass(slots=True, kw_only=True)
class FinaliseAttempt(Request[FinaliseCode]):
    SCRIPT = Script("finalise_attempt")
    CODES = FinaliseCode
    KEYS = (
        "operation",
        "ledger",
        "send",
        "due",
        "ambiguous",
        "live",
        "messages",
        "observe",
        "settled",
        "finished",
    )

    attempt_id: str
    now: int
    entry_id: str
    result: Finalisation
    retention_ms: int
    operation_id: str

    def decode(self, raw: Any) -> FinaliseCode:
        return FinaliseCode(raw[0])


class Settled(StrEnum):
    """resolve_ambiguous.lua's reply codes."""

    OK = "ok"
    STALE = "stale"  # the operation is no longer ambiguous: nothing written


@dataclass(slots=True, kw_only=True)
class ResolveAmbiguous(Request[tuple[Settled, str]]):
    """Settle an ambiguous operation: accepted, replay (same id and key) or review. A replay
    with ``pin`` is sent only through that provider (``pin_for``: resolve_ambiguous.lua)."""

    SCRIPT = Script("resolve_ambiguous")
    CODES = Settled
    KEYS = (
        "operation",
        "ledger",
        "send",
        "ambiguous",
        "review",
        "live",
        "messages",
        "observe",
        "settled",
    )

    now: int
    decision: str
    message_id: str
    observe_until: int
    reason: str
    retention_ms: int
    operation_id: str
    pin: str = ""
    pin_for: str = "replay"

    def decode(self, raw: Any) -> tuple[Settled, str]:
        return Settled(raw[0]), str(raw[1])


class QuarantineCode(StrEnum):
    """quarantine.lua's reply codes."""

    OK = "ok"
    REFUSED = "refused"  # the state does not allow it (or the operation is missing)


@dataclass(slots=True, kw_only=True)
class Quarantine(Request[tuple[QuarantineCode, str]]):
    """Quarantine, release or close one operation; (code, previous state or refusing
    state)."""

    SCRIPT = Script("quarantine")
    CODES = QuarantineCode
    KEYS = ("operation", "ledger", "send", "due", "ambiguous", "review", "live", "finished")

    action: str  # "quarantine" | "release" | "close"
    now: int
    reason: str
    retention_ms: int = 0  # read by "close" only
    operation_id: str

    def __post_init__(self) -> None:
        self.reason = self.reason[:NOTE_LIMIT]

    def decode(self, raw: Any) -> tuple[QuarantineCode, str]:
        return QuarantineCode(raw[0]), str(raw[1])


class HoldCode(StrEnum):
    """hold_refused.lua's reply codes."""

    OK = "ok"
    REFUSED = "refused"  # why not: the reply's detail


@dataclass(slots=True, kw_only=True)
class HoldRefused(Request[tuple[HoldCode, str]]):
    """Hold for review an operation waiting on the undocumented refusal that tripped the
    refusals guard; (code, why not)."""

    SCRIPT = Script("hold_refused")
    CODES = HoldCode
    KEYS = ("operation", "due", "review")

    now: int
    reason: str
    note: str
    operation_id: str

    def __post_init__(self) -> None:
        self.note = self.note[:NOTE_LIMIT]

    def decode(self, raw: Any) -> tuple[HoldCode, str]:
        return HoldCode(raw[0]), str(raw[1]) if len(raw) > 1 else ""

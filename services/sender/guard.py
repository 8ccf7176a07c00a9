"""The refusals guard: a provider that refuses K distinct operations — K distinct recipients
of K distinct accounts — for one and the same reason no page of the provider documents,
within a window, is refusing us, not K players.

It counts only undocumented refusals (shared.providers.base.Refusal.UNDOCUMENTED). A refusal
the provider documents as about one recipient (an inactive or invalid address) fails that
reset and never counts: five accounts whose addresses the provider refuses must not stop
every player's email. A documented refusal of our side pauses at its first occurrence
without the guard.

Each undocumented refusal leaves its operation waiting (deferred, attempt refunded), never
failed. Tripped, the decision is taken here once, synchronously (no await between the
count and the verdict, so a concurrent attempt cannot clear it), then written by one script
on the control hash (shared/scripts/trip_guard.lua): the provider pauses (kind "refusals",
the reason in ``resetgate ops status``) and the K operations are held for a person
(shared/scripts/hold_refused.lua), not requeued to trip it again;
``resetgate ops provider-resume`` sends one of them as the probe. Any acceptance ends a
streak. One guard per provider per sender process; the pause it sets is shared by every
sender.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.model import Outcome
from shared.providers.base import Refusal, SendResult


@dataclass(frozen=True, slots=True)
class Refused:
    operation_id: str
    account_id: str
    at_ms: int
    recipient: str = ""  # a digest of the address, never the address


@dataclass(frozen=True, slots=True)
class Trip:
    """The guard's verdict: the reason it counted and the operations that tripped it."""

    reason: str
    streak: list[Refused]


@dataclass(slots=True)
class RefusalGuard:
    operations: int  # K; 0 turns the guard off
    window_ms: int
    reason: str = ""  # the streak's reason
    streak: list[Refused] = field(default_factory=list)

    def accepted(self) -> None:
        self.streak.clear()

    def refused(self, refusal: Refused, reason: str) -> Trip | None:
        """The trip this undocumented refusal completes, else None."""
        if self.operations <= 0:
            return None
        oldest = refusal.at_ms - self.window_ms
        if reason != self.reason:
            self.reason, self.streak = reason, []
        self.streak = [r for r in self.streak if r.at_ms >= oldest and _distinct(r, refusal)]
        self.streak.append(refusal)
        if len(self.streak) < self.operations:
            return None
        tripped, self.streak = self.streak, []
        return Trip(reason, tripped)


def undocumented(result: SendResult) -> bool:
    """Whether ``result`` is a refusal no provider page documents: the only kind counted."""
    return result.outcome is Outcome.PERMANENT and result.refusal is Refusal.UNDOCUMENTED


def _distinct(older: Refused, newer: Refused) -> bool:
    """Whether ``older`` still counts beside ``newer``: another operation, another account
    and another recipient (one player's addresses or accounts count once)."""
    return (
        older.operation_id != newer.operation_id
        and older.account_id != newer.account_id
        and (not newer.recipient or older.recipient != newer.recipient)
    )

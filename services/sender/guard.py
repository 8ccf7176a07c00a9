"""The refusals guard: a provider that refuses the last K distinct operations permanently,
for one and the same reason, within a window, is refusing us, not K players.

No provider documents such a refusal, which is why it needs a guard: a misread error code
would otherwise fail every reset. Tripped, the provider pauses (kind "refusals", a page, the
reason in ``resetgate ops status``) and the K operations go back to the queue with their
attempt refunded (shared/scripts/requeue_refused.lua). Any acceptance ends a streak. One
guard per provider per sender process; the pause it sets is shared by every sender.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Refused:
    operation_id: str
    account_id: str
    at_ms: int


@dataclass(slots=True)
class RefusalGuard:
    operations: int  # K; 0 turns the guard off
    window_ms: int
    reason: str = ""  # the streak's reason
    streak: list[Refused] = field(default_factory=list)
    # The reason that tripped the guard: while the provider stays paused, an attempt that
    # was already in flight and is refused the same way goes back to the queue too.
    tripped: str = ""

    def accepted(self) -> None:
        self.streak.clear()

    def resumed(self) -> None:
        self.tripped = ""

    def refused(self, refusal: Refused, reason: str) -> list[Refused] | None:
        """The streak that this refusal completes (the guard trips), else None."""
        if self.operations <= 0:
            return None
        oldest = refusal.at_ms - self.window_ms
        if reason != self.reason:
            self.reason, self.streak = reason, []
        self.streak = [r for r in self.streak
                       if r.at_ms >= oldest and r.operation_id != refusal.operation_id]  # fmt: skip
        self.streak.append(refusal)
        if len(self.streak) < self.operations:
            return None
        tripped, self.streak, self.tripped = self.streak, [], reason
        return tripped

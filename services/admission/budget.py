"""The public endpoint's admission budget: a share of the provider's daily quota.

The quota is the studio's, not the public's: with a quota of 20 a day, 22 public requests
for known logins used to pause sending for every player until the window rolled over (about
174 known logins spend a 50,000-a-day SES quota within today's per-address and per-account
limits). The public endpoint may create at most ``limit - reserved`` operations per quota
window, counted by every admission replica in one Redis count (quota_take.lua, atomic: no
two replicas can both take the last one), and ``reserved`` (RESETGATE_PUBLIC_BUDGET_
RESERVED_SHARE of the quota, rounded up) is left for support agents (internal API) and
contact forms (the router), which the budget never refuses. So an attacker can delay other
public requests, never every player's email, and never an agent's.

The quota is the one the senders keep to (shared.quota.publish): none configured, no
budget, and no round trip. A public request the budget refuses answers the same 202 at the
same floor (services/admission/public.py); it is counted as ``budget_exhausted``, and the
budget's use is the ``resetgate_public_budget_used`` gauge (alert PublicBudgetFilling).
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, replace

from shared import clock, keys, metrics
from shared.quota import DailyQuota, published
from shared.redis import RedisClient

REREAD_S = 10.0  # how stale the published quota may be: a sender restart republishes it


@dataclass(frozen=True, slots=True)
class Taken:
    """One admission's share of the budget: ``allowed``; ``at`` (ms) when one was taken,
    0 when nothing was (no budget, a look, a refusal)."""

    allowed: bool
    at: int = 0


NOT_TAKEN = Taken(True)


def public_limit(quota: int, reserved_share: float) -> int:
    """What the public endpoint may spend of ``quota``: the reserve is rounded up."""
    return max(0, quota - math.ceil(quota * reserved_share))


class PublicBudget:
    def __init__(self, client: RedisClient, provider: str, reserved_share: float) -> None:
        self.client = client
        self.provider = provider
        self.reserved_share = reserved_share
        self._budget: DailyQuota | None = None
        self._read_at = -math.inf

    async def take(self) -> Taken:
        """One creation's share, or a refusal; no budget: allowed, no round trip."""
        budget = await self._current()
        if budget is None:
            return NOT_TAKEN
        now = clock.now_ms()
        taken = await budget.take(self.client, now)
        metrics.public_budget_used.set(taken.used)
        return Taken(True, now) if taken.taken else Taken(False)

    async def look(self) -> None:
        """The same round trip as a take, counting nothing (an unknown login's)."""
        budget = await self._current()
        if budget is not None:
            await budget.look(self.client, clock.now_ms())

    async def give_back(self, taken: Taken) -> None:
        """The admission created nothing (it converged, or was in its cooldown)."""
        budget = self._budget
        if taken.at and budget is not None:
            await budget.give_back(self.client, taken.at)

    async def _current(self) -> DailyQuota | None:
        now = asyncio.get_running_loop().time()
        if now - self._read_at >= REREAD_S:
            # Marked read only once read: requests arriving meanwhile read it too, rather
            # than pass unbudgeted on the value from before.
            quota = await published(self.client, self.provider)
            self._read_at = now
            limit = public_limit(quota.limit, self.reserved_share) if quota else 0
            self._budget = (
                replace(quota, limit=limit, counter=keys.PUBLIC_BUDGET) if quota else None
            )
            metrics.public_budget_limit.set(limit)
        return self._budget

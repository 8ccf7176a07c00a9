"""A provider's daily quota (SES's ``Max24HourSend``): counted by the senders over a rolling
window, and the provider pause that waits for the window to roll over instead of a retry
loop (``shared.control.quota_pause``). What is queued waits; it expires only at its horizon.

A quota is not a rate: at 1 send/s a 200-a-day account runs out in 200 s, and every send
after that would be refused until sends of the last 24 h age out. The senders take one send
from the shared count before each call (``quota_take.lua``) and pause the provider, until
the oldest slice of the window leaves it, when none is left. A refusal that says the quota
is used up (SES's ``ThrottlingException: Daily message quota exceeded``, for which AWS says
to "wait for an interval of up to 10 minutes, and then retry",
https://docs.aws.amazon.com/ses/latest/dg/manage-sending-quotas-errors.html) pauses it too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from shared import codec, keys
from shared.providers.base import QUOTA_EXCEEDED as QUOTA_EXCEEDED
from shared.redis import RedisClient
from shared.scripts.pacing import QuotaTake, Taken

RECHECK_MS = 600_000  # AWS: wait "up to 10 minutes", then retry
SLICES = 96  # a window counted in 96 slices: 15 minutes of a day


@runtime_checkable
class HasDailyQuota(Protocol):
    async def daily_quota(self) -> float | None:
        """Sends allowed per rolling 24 h, where the provider reports it."""
        ...


@dataclass(frozen=True, slots=True)
class DailyQuota:
    """``limit`` sends per ``window_ms`` through one provider, shared by every replica; or,
    with ``counter`` (shared.keys.PUBLIC_BUDGET), another count kept the same way."""

    provider: str
    limit: int
    window_ms: int
    counter: str = ""

    def _request(self, now: int, delta: int) -> QuotaTake:
        return QuotaTake(
            counter=self.counter or keys.provider_quota(self.provider),
            now=now,
            window_ms=self.window_ms,
            slice_ms=max(1, self.window_ms // SLICES),
            limit=self.limit,
            delta=delta,
        )

    async def take(self, client: RedisClient, now: int) -> Taken:
        return await self._request(now, 1).run(client)

    async def look(self, client: RedisClient, now: int) -> Taken:
        """What a take would answer, counting nothing (the same script and round trip)."""
        return await self._request(now, 0).run(client)

    async def give_back(self, client: RedisClient, taken_at: int) -> None:
        """The provider did not take the send: it does not count against the quota."""
        await self._request(taken_at, -1).run(client)


async def publish(client: RedisClient, provider: str, quota: DailyQuota | None) -> None:
    """Say which quota the senders keep to through ``provider`` (None: none), so admission
    can size the public endpoint's budget on it (services/admission/budget.py)."""
    if quota is None:
        await client.hdel(keys.DAILY_QUOTAS, provider)
        return
    value = codec.dumps_str({"limit": quota.limit, "window_ms": quota.window_ms})
    await client.hset(keys.DAILY_QUOTAS, provider, value)


async def published(client: RedisClient, provider: str) -> DailyQuota | None:
    """The quota the senders published for ``provider``, or None."""
    raw = await client.hget(keys.DAILY_QUOTAS, provider)
    if not raw:
        return None
    try:
        note = codec.loads(raw)
        return DailyQuota(provider, int(note["limit"]), int(note["window_ms"]))
    except (ValueError, KeyError, TypeError):
        return None  # unreadable: no budget, rather than a wrong one


def refused_until(quota: DailyQuota | None, now: int) -> int:
    """Until when a refusal that says the quota is used up pauses the provider: AWS's 10
    minutes, or the quota's window if shorter."""
    return now + min(RECHECK_MS, quota.window_ms if quota else RECHECK_MS)


def quota_for(
    provider: str, reported: float | None, configured: int, window_ms: int
) -> DailyQuota | None:
    """The quota the senders keep to: the provider's reported one, lowered to the configured
    one (0: none configured); None when neither exists."""
    limits = [int(x) for x in (reported, configured) if x and x > 0]
    return DailyQuota(provider, min(limits), window_ms) if limits else None

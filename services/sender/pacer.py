"""Provider-wide pacing, shared by every sender replica through one Redis token bucket.

Within a process only one coroutine asks Redis at a time, so waiting workers never poll
the bucket in a herd; across processes the bucket itself keeps the sum under the ceiling.
A wait here is the provider's brake, not a retry: the operation is not yet begun.
"""

from __future__ import annotations

import asyncio

from shared import clock, metrics
from shared.operations import pace_acquire, pace_feedback
from shared.redis import RedisClient
from shared.service import sleep_or_stop


class Pacer:
    def __init__(
        self, client: RedisClient, provider: str, *, ceiling: float, floor: float, burst: float
    ) -> None:
        self.client = client
        self.provider = provider
        self.ceiling = ceiling
        self.floor = floor
        self.burst = burst
        self.step = max(ceiling / 100, 0.1)
        self.rate = ceiling
        self._lock = asyncio.Lock()

    async def acquire(self, stop: asyncio.Event) -> bool:
        """Wait for one send slot; False if shutdown began first."""
        async with self._lock:
            while not stop.is_set():
                grant = await pace_acquire(
                    self.client,
                    self.provider,
                    now=clock.now_ms(),
                    ceiling=self.ceiling,
                    burst=self.burst,
                )
                self._publish(grant.rate, grant.blocked_until)
                if grant.granted:
                    return True
                await sleep_or_stop(stop, min(grant.wait_ms, 1000) / 1000)
        return False

    async def throttled(self, blocked_until: int) -> None:
        self.rate = await pace_feedback(
            self.client,
            self.provider,
            throttled=True,
            now=clock.now_ms(),
            blocked_until=blocked_until,
            ceiling=self.ceiling,
            floor=self.floor,
            step=self.step,
        )
        self._publish(self.rate, blocked_until)

    async def succeeded(self) -> None:
        if self.rate >= self.ceiling:
            return  # nothing to climb back to: skip the round trip on the hot path
        self.rate = await pace_feedback(
            self.client,
            self.provider,
            throttled=False,
            now=clock.now_ms(),
            blocked_until=0,
            ceiling=self.ceiling,
            floor=self.floor,
            step=self.step,
        )
        metrics.pacing_rate.labels(self.provider).set(self.rate)

    def _publish(self, rate: float, blocked_until: int) -> None:
        self.rate = rate
        metrics.pacing_rate.labels(self.provider).set(rate)
        blocked = blocked_until / 1000 if blocked_until > clock.now_ms() else 0
        metrics.pacing_blocked_until.labels(self.provider).set(blocked)

"""The poller's request budget: a token bucket over every provider call it makes, and the
block a 429 sets. In-process: the lease makes one replica the only caller."""

from __future__ import annotations

import time
from collections.abc import Callable


class Budget:
    def __init__(
        self,
        per_minute: int,
        burst: int,
        backoff_cap: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate = per_minute / 60
        self.burst = float(burst)
        self.backoff_cap = backoff_cap
        self.clock = clock
        self.tokens = float(burst)
        self.updated = clock()
        self.blocked_until = 0.0
        self.throttles = 0  # consecutive 429s, for the fallback backoff

    def _refill(self) -> float:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        return now

    def wait(self) -> float:
        """Seconds until a request may be made (0: now). Spends nothing."""
        now = self._refill()
        blocked = max(0.0, self.blocked_until - now)
        short = max(0.0, (1 - self.tokens) / self.rate)
        return max(blocked, short)

    def take(self) -> float:
        """Spend one request if allowed now: 0.0, else the seconds to wait (nothing spent)."""
        wait = self.wait()
        if wait == 0:
            self.tokens -= 1
        return wait

    def throttled(self, delay: float | None) -> float:
        """A 429: wait as advised, else a capped exponential backoff. Returns the wait."""
        self.throttles += 1
        if delay is None:
            delay = min(self.backoff_cap, 2.0 ** min(self.throttles, 16))
        delay = max(delay, 1.0)  # "Retry-After: 0" or a past date must not turn into a spin
        self.blocked_until = max(self.blocked_until, self.clock() + delay)
        return delay

    def answered(self) -> None:
        """Any non-429 answer ends a run of throttles."""
        self.throttles = 0

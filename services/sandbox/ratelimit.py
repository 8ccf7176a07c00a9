"""In-memory token bucket: the provider-side rate limit the sender must respect.

The rate can follow a schedule (``"100:20,50:20,100"``: 100/s for 20 s, 50/s for 20 s, then
100/s) and part of it can be taken by another sender sharing the quota (the same format,
with shares of the rate instead of rates). Both clocks start at the first request.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from services.sandbox.settings import Schedule


class TokenBucket:
    """``rate`` tokens per second up to ``burst``; a rate of 0 means unlimited.

    ``take()`` answers 0.0 when a token was taken, else the honest number of seconds
    until one will be available, which becomes the Retry-After value. ``taken`` is the
    share of the rate another sender uses at the same time (a shared quota).
    """

    def __init__(
        self,
        rate: float | Schedule,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        *,
        taken: Schedule | None = None,
    ) -> None:
        self.schedule = rate if isinstance(rate, Schedule) else Schedule.constant(rate)
        self.taken = taken or Schedule.constant(0.0)
        self.burst = float(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._stamp = clock()
        self._started: float | None = None

    @property
    def rate(self) -> float:
        """The rate left for our sender now (the schedule less the shared-quota share)."""
        elapsed = 0.0 if self._started is None else self._clock() - self._started
        full = self.schedule.at(elapsed)
        return full * max(0.0, 1.0 - self.taken.at(elapsed))

    def take(self) -> float:
        if self._started is None:
            self._started = self._stamp = self._clock()
        if self.schedule.last <= 0 and not self.schedule.phases:
            return 0.0
        now, rate = self._clock(), self.rate
        self._tokens = min(self.burst, self._tokens + (now - self._stamp) * rate)
        self._stamp = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return 0.0
        return (1.0 - self._tokens) / rate


class FixedWindow(TokenBucket):
    """SendGrid's documented model: "a fixed number of requests per refresh period", and
    once it is used up no request succeeds "for the remainder of the refresh period"
    (https://www.twilio.com/docs/sendgrid/api-reference/how-to-use-the-sendgrid-v3-api/
    rate-limits). The period is one second ending on a whole epoch second, the resolution
    of ``X-RateLimit-Reset``; ``rate`` requests fit in one. A token bucket would refill
    within milliseconds, which those headers cannot say.
    """

    def __init__(
        self,
        rate: float | Schedule,
        *,
        taken: Schedule | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(rate, 1, clock, taken=taken)
        self.window = 0  # the epoch second the current period started at
        self.used = 0

    @property
    def limit(self) -> int:
        return max(1, int(self.rate))

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.used) if self.window == int(self._clock()) else self.limit

    @property
    def reset(self) -> int:
        """The epoch second the current period ends at (X-RateLimit-Reset)."""
        return int(self._clock()) + 1

    def take(self) -> float:
        if self._started is None:
            self._started = self._clock()
        if self.schedule.last <= 0 and not self.schedule.phases:
            return 0.0
        now = self._clock()
        if int(now) != self.window:
            self.window, self.used = int(now), 0
        if self.used < self.limit:
            self.used += 1
            return 0.0
        return self.window + 1 - now


class Blackout(TokenBucket):
    """Every request is refused for ``seconds`` from the first one, then ``inner`` decides:
    a provider-wide throttle (an account-level limit, an incident) that outlasts any retry
    budget. The wait it reports is the blackout's remainder; whether a 429 states it is the
    Retry-After form's choice ("absent": no wait stated)."""

    def __init__(
        self, inner: TokenBucket, seconds: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__(inner.schedule, int(inner.burst), clock, taken=inner.taken)
        self.inner = inner
        self.seconds = seconds

    @property
    def rate(self) -> float:
        return self.inner.rate

    def take(self) -> float:
        if self._started is None:
            self._started = self._clock()
        left = self._started + self.seconds - self._clock()
        return left if left > 0 else self.inner.take()


def send_bucket(
    rate: float,
    schedule: str,
    shared: str,
    burst: int,
    *,
    fixed_window: bool = False,
    blackout: float = 0.0,
) -> TokenBucket:
    """The send bucket the settings describe: a schedule, when given, overrides the rate."""
    limit = Schedule.parse(schedule) if schedule else Schedule.constant(rate)
    taken = Schedule.parse(shared, below=1.0) if shared else None
    inner: TokenBucket = (
        FixedWindow(limit, taken=taken) if fixed_window else TokenBucket(limit, burst, taken=taken)
    )
    return Blackout(inner, blackout) if blackout > 0 else inner

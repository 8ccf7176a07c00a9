"""Provider-wide pacing, shared by every sender replica through one schedule in Redis.

One round trip reserves every slot due within a short horizon (``PaceAcquire``); the
workers of this process then take the slots in order and each waits for its own locally.
Within a process only one coroutine asks Redis at a time, so waiting workers never poll in
a herd. A 429 seen here drops the slots still reserved, so this replica stops at once;
the others learn of the cut within one horizon. A wait here is the provider's brake, not
a retry: the operation is not yet begun.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import replace

from services.sender import pacing
from shared import clock, metrics
from shared.loops import cap_advised_wait
from shared.model import Outcome
from shared.providers.base import SendResult
from shared.redis import RedisClient
from shared.scripts.pacing import Observation, PaceAcquire, PaceFeedback, Tuning
from shared.service import sleep_or_stop

NO_ADVICE_MAX_MS = 2000.0


class Pacer:
    def __init__(
        self,
        client: RedisClient,
        provider: str,
        *,
        ceiling: float,
        floor: float,
        burst: float,
        max_wait: float,
        tuning: Tuning | None = None,
    ) -> None:
        self.client = client
        self.provider = provider
        self.ceiling = ceiling
        self.floor = floor
        self.burst = burst
        self.max_wait = max_wait  # RESETGATE_MAX_ADVISED_WAIT_SECONDS: the longest block
        self.tuning = tuning or Tuning()
        self.declared: float | None = None  # the provider's declared account rate
        self.rate = ceiling
        self._slots: deque[float] = deque()
        self._epoch = 0  # bumped when reserved slots became void (a 429, a block)
        self._waiting = 0  # workers in acquire()
        self._reserved_until = 0.0  # the last slot of the last batch (ms)
        self._accepted = 0  # sends accepted since the shared schedule last heard of them
        self._starting = False  # the shared schedule is in a slow start
        self._lock = asyncio.Lock()
        self._accepted_seen = asyncio.Event()

    @property
    def waiting(self) -> int:
        """Workers waiting in :meth:`acquire` for a slot."""
        return self._waiting

    @property
    def limit(self) -> float:
        """The configured ceiling, lowered to the provider's declared rate when it has one."""
        return min(self.ceiling, self.declared) if self.declared else self.ceiling

    @property
    def burst_ms(self) -> float:
        """``burst`` slots' worth of time at the current rate: what the provider's bucket
        takes to refill a burst. It bounds how late a slot may still be spent (a process that
        stalled, on a busy core or in a GC pause, catches up with at most that burst; every
        slot it missed, spent at once, would overflow the provider and each 429 would cut the
        shared rate for every replica), and it is the pause after a 429 that gives no wait."""
        return self.burst * 1000 / self.rate

    async def acquire(self, stop: asyncio.Event) -> float | None:
        """Wait for one send slot: its time (ms), or None once shutdown began."""
        self._waiting += 1
        try:
            while not stop.is_set():
                if not self._slots:
                    await self._refill(stop)
                    continue
                slot, epoch = self._slots.popleft(), self._epoch
                delay = slot - clock.now_ms()
                if delay < -self.burst_ms:
                    continue  # its moment passed unused: spent now it would be a burst
                if delay > 0:
                    await sleep_or_stop(stop, clock.to_seconds(delay))
                if epoch == self._epoch and not stop.is_set():
                    return slot
            return None
        finally:
            self._waiting -= 1

    async def _refill(self, stop: asyncio.Event) -> None:
        async with self._lock:
            # Slots of the last batch still ahead cover the next moments: asking now would
            # only find the horizon taken. Ask when half a horizon of them is left.
            # In a slow start an accepted send doubles the rate and frees a slot now: ask
            # at once then, not half a horizon before a slot of the slower rate.
            ahead = self._reserved_until - clock.now_ms() - self.tuning.horizon_ms / 2
            if ahead > 0 and self._starting:
                await self._until_accepted(stop, clock.to_seconds(ahead))
            elif ahead > 0:
                await sleep_or_stop(stop, clock.to_seconds(ahead))
            if self._slots or stop.is_set():
                return
            slots = await PaceAcquire(
                provider=self.provider,
                tuning=self.tuning,
                now=clock.now_ms(),
                ceiling=self.limit,
                burst=self.burst,
                want=max(1, self._waiting),  # every worker waiting here needs one
                accepted=self._take_accepted(),
            ).run(self.client)
            self._publish(slots.rate, slots.blocked_until)
            self._starting = slots.starting
            if slots.count:
                self._slots.extend(times := slots.times_ms())
                self._reserved_until = times[-1]
            elif slots.wait_ms > self.tuning.horizon_ms or slots.starting:
                await self._until_accepted(stop, clock.to_seconds(min(slots.wait_ms, 1000)))
            else:
                await sleep_or_stop(stop, clock.to_seconds(slots.wait_ms))

    async def _until_accepted(self, stop: asyncio.Event, seconds: float) -> None:
        """A long wait for the next slot ends early when a send is accepted: reported at
        once, it may raise the rate (after an outage the next slot was promised at the floor,
        20 s away). Short waits are not cut, so a fast rate costs no extra round trips."""
        self._accepted_seen.clear()
        waits = [
            asyncio.ensure_future(stop.wait()),
            asyncio.ensure_future(self._accepted_seen.wait()),
        ]
        try:
            await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()

    async def observe(self, result: SendResult, slot_ms: float) -> None:
        """Feed one answer's rate signals to the shared schedule (a round trip only when
        the answer says something the schedule does not already obey)."""
        declared = pacing.declared_rate(result.rate)
        if declared is not None:
            self.declared = declared
        if result.outcome is Outcome.ACCEPTED:
            self._accepted += 1  # reported with the next reservation: no round trip here
            self._accepted_seen.set()
        # A 429 without a wait pauses for a burst's refill, at most 2 s: at the floor rate a
        # burst is minutes, and the next slot is far enough away already.
        no_advice_ms = min(self.burst_ms, NO_ADVICE_MAX_MS)
        seen = self._capped(
            pacing.observe(result, slot_ms, clock.now_ms(), self.floor, no_advice_ms)
        )
        if not seen.matters(self.rate):
            return
        if seen.throttled or seen.blocked_until > seen.now:
            # What this replica reserved before the news is void: give its span back.
            self._epoch += 1
            seen = replace(seen, returned_ms=len(self._slots) * 1000 / self.rate)
            self._slots.clear()
            self._reserved_until = 0.0
        seen = replace(seen, accepted=self._take_accepted())
        adjusted = await PaceFeedback(
            provider=self.provider, tuning=self.tuning, seen=seen, floor=self.floor
        ).run(self.client)
        if adjusted.cut:
            metrics.pacing_cuts.labels(self.provider).inc()
        self._publish(adjusted.rate or self.rate, adjusted.blocked_until)

    def _take_accepted(self) -> int:
        accepted, self._accepted = self._accepted, 0
        return accepted

    def _capped(self, seen: Observation) -> Observation:
        """The provider-wide block lasts at most ``max_wait``: one absurd Retry-After must not
        stop every replica (the operation keeps its own advised retry time, bounded by its
        horizon)."""
        wait_s = clock.to_seconds(seen.blocked_until - seen.now)
        capped = cap_advised_wait(wait_s, self.max_wait, "sender")
        if capped == wait_s:
            return seen
        return replace(seen, blocked_until=seen.now + clock.to_ms(capped))

    def _publish(self, rate: float, blocked_until: int) -> None:
        self.rate = rate
        metrics.pacing_rate.labels(self.provider).set(rate)
        blocked = clock.to_seconds(blocked_until) if blocked_until > clock.now_ms() else 0
        metrics.pacing_blocked_until.labels(self.provider).set(blocked)

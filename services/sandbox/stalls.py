"""The sandbox's own stalls: a provider stand-in that is not scheduled throttles on time.

On a shared machine the sandbox process is now and then not scheduled for tens of
milliseconds. Requests that arrived on time wait in the socket meanwhile, and the token
bucket (``ratelimit.py``) judges them when they are read: the tokens that accrued during the
stall beyond the bucket's depth are lost, so a client that paced perfectly gets 429s. A real
provider does not stall on our machine's load. A timer that should tick every 10 ms tells
how late the loop runs; a 429 answered during or just after such a stall is counted apart
(``send_throttled_after_stall_total``), so a benchmark can tell the pacer's 429s from the
machine's.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

TICK_SECONDS = 0.01
STALL_SECONDS = 0.025  # later than this is a stall (a quarter of a 100 ms horizon)
AFTER_SECONDS = 0.1  # requests read this soon after a stall had queued during it


class StallWatch:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.stalls = 0
        self.longest = 0.0
        self.late = 0.0  # seconds the loop ran late in all, over its stalls
        self._tick = clock()
        self._resumed = -1e9

    def tick(self) -> None:
        now = self._clock()
        late = now - self._tick - TICK_SECONDS
        self._tick = now
        if late >= STALL_SECONDS:
            self.stalls += 1
            self.longest = max(self.longest, late)
            self.late += late
            self._resumed = now

    def stalled_recently(self) -> bool:
        """True inside a stall the timer has not noticed yet, and shortly after one."""
        now = self._clock()
        overdue = now - self._tick - TICK_SECONDS >= STALL_SECONDS
        return overdue or now - self._resumed < AFTER_SECONDS

    async def run(self) -> None:
        while True:
            await asyncio.sleep(TICK_SECONDS)
            self.tick()

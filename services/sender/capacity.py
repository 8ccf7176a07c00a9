"""How many send jobs a sender may have taken (read or claimed from its streams, not yet
finished).

Readers reserve places before they read and release what they did not fill; a worker
releases one place when its job is finished or handed back. So the read-ahead is bounded
by what the workers can start soon, and a sender that stops has little to hand back.
"""

from __future__ import annotations

import asyncio


class Capacity:
    def __init__(self, places: int, low_water: int) -> None:
        self.places = places
        # A reader waits until this much is free, so one round trip reads a batch instead
        # of one entry each time a worker finishes.
        self.low_water = max(1, min(low_water, places))
        self.reserved = 0
        self._changed = asyncio.Condition()

    @property
    def free(self) -> int:
        return self.places - self.reserved

    async def reserve(self, most: int, stop: asyncio.Event) -> int:
        """Wait until the low-water mark (or ``most``) is free, then reserve up to ``most``;
        0 once shutdown began."""
        need = min(self.low_water, most)
        async with self._changed:
            while self.free < need and not stop.is_set():
                await self._changed.wait()
            if stop.is_set():
                return 0
            reserved = min(most, self.free)
            self.reserved += reserved
            return reserved

    def reserve_now(self, most: int) -> int:
        reserved = max(0, min(most, self.free))
        self.reserved += reserved
        return reserved

    async def release(self, count: int) -> None:
        if count <= 0:
            return
        async with self._changed:
            self.reserved -= count
            if self.free >= self.low_water:  # nobody waits for less: no herd per job
                self._changed.notify_all()

    async def wake(self) -> None:
        """Let every waiting reader see that shutdown began."""
        async with self._changed:
            self._changed.notify_all()

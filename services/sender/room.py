"""How many send jobs a sender may hold (read from its streams, not yet finished).

Readers take room before they read and give back what they did not fill; a worker gives
back one place when its job is finished or handed back. So the read-ahead is bounded by
what the workers can start soon, and a sender that stops has little to hand back.
"""

from __future__ import annotations

import asyncio


class Room:
    def __init__(self, capacity: int, low_water: int) -> None:
        self.capacity = capacity
        # A reader waits until this much room is free, so one round trip reads a batch
        # instead of one entry each time a worker finishes.
        self.low_water = max(1, min(low_water, capacity))
        self.held = 0
        self._changed = asyncio.Condition()

    @property
    def free(self) -> int:
        return self.capacity - self.held

    async def take(self, most: int, stop: asyncio.Event) -> int:
        """Wait until the low-water mark (or ``most``) is free, then take up to ``most``;
        0 once shutdown began."""
        need = min(self.low_water, most)
        async with self._changed:
            while self.free < need and not stop.is_set():
                await self._changed.wait()
            if stop.is_set():
                return 0
            taken = min(most, self.free)
            self.held += taken
            return taken

    def take_now(self, most: int) -> int:
        taken = max(0, min(most, self.free))
        self.held += taken
        return taken

    async def give(self, count: int) -> None:
        if count <= 0:
            return
        async with self._changed:
            self.held -= count
            if self.free >= self.low_water:  # nobody waits for less: no herd per job
                self._changed.notify_all()

    async def wake(self) -> None:
        """Let every waiting reader see that shutdown began."""
        async with self._changed:
            self._changed.notify_all()

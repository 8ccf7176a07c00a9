"""What the archive's tests share: an archiver in this event loop, and waiting on it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from redis.asyncio import Redis

from services.archiver.worker import Archiver
from shared.archive import open_pool
from shared.keys import PartitionKeys
from tests.archive.conftest import Settler, archiver_settings
from tests.support.processes import WAIT_TIMEOUT

# Fields that may change after the archive's snapshot: its own mark, the event dedupe slots.
AFTER_SNAPSHOT = ("archived_at", "evt:", "observation_closed_at")


def comparable(raw: dict[str, str]) -> dict[str, str]:
    """An operation hash without what may change after the archive's snapshot: what the
    archive and Redis must hold alike."""
    return {k: v for k, v in raw.items() if not k.startswith(AFTER_SNAPSHOT)}


@asynccontextmanager
async def archiver(settler: Settler, dsn: str, **overrides: Any) -> AsyncIterator[Archiver]:
    settings = archiver_settings(settler.settings.redis_url, dsn, **overrides)
    async with open_pool(settings) as pool:
        worker = Archiver(settings, settler.redis, pool)
        await worker.ensure_groups()
        yield worker


async def drain(worker: Archiver, settler: Settler, timeout: float = WAIT_TIMEOUT) -> None:
    """Archive steps until nothing waits on the settled streams."""
    async with asyncio.timeout(timeout):
        while await settler.waiting() or len(worker.held):
            if await worker.archive_step():
                await asyncio.sleep(0.05)


async def until(probe: Callable[[], Awaitable[bool]], timeout: float = WAIT_TIMEOUT) -> None:
    async with asyncio.timeout(timeout):
        while True:
            if await probe():
                return
            await asyncio.sleep(0.1)


async def gone(redis: Redis, *keys: str) -> bool:
    return not await redis.exists(*keys)


async def archived_and_expired(settler: Settler, dsn: str, *operation_ids: str) -> None:
    """Archive ``operation_ids`` with a 1 s tail and wait until Redis has let them go (not
    one still observed for delivery: it stays until its window ends, then the tail)."""
    async with archiver(settler, dsn, archive_tail_seconds=1) as worker:
        await drain(worker, settler)
    for op in operation_ids:
        keys = PartitionKeys.of(op)
        await until(lambda k=keys, o=op: gone(settler.redis, k.operation(o), k.attempts(o)))

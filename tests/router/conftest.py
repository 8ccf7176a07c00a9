"""A router running in this event loop against the real test Redis (directory in Redis)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import Redis

from services.ctl.embedded import RedisServer
from services.router.app import build_router, workers
from services.router.settings import RouterSettings
from services.router.worker import Router, ensure_group
from shared.directory import Account, Directory, RedisDirectory
from shared.keys import CONTACT_FORMS, CONTACT_FORMS_DEAD, ROUTER_RETRY, SUPPORT_CASES
from tests.conftest import TEST_TOKEN_KEYS
from tests.sender.conftest import wait_for
from tests.support.processes import WAIT_TIMEOUT


def router_settings(redis_url: str, **overrides: Any) -> RouterSettings:
    values: dict[str, Any] = {
        "redis_url": redis_url,
        "token_keys": TEST_TOKEN_KEYS,
        "partitions": 4,
        "cooldown_seconds": 60,
        "block_ms": 50,
        "claim_idle_seconds": 1,
        "consumer_name": "test-router",
    }
    values.update(overrides)
    return RouterSettings(**values)


class Desk:
    """The contact-form side and the support side of one router, over a real Redis."""

    def __init__(self, redis: Redis, redis_url: str) -> None:
        self.redis = redis
        self.redis_url = redis_url
        self.sequence = 0

    async def account(self, account_id: str) -> str:
        login = f"login-{account_id}"
        address = f"{account_id}@example.com"
        await RedisDirectory(self.redis).add(login, Account(account_id, address))
        return login

    async def submit(self, **fields: str) -> str:
        self.sequence += 1
        values = {
            "event_id": f"evt-{self.sequence}",
            "topic": "password_reset",
            "submitted_at": "2026-01-01T00:00:00Z",
            **fields,
        }
        return str(await self.redis.xadd(CONTACT_FORMS, values))  # type: ignore[arg-type]

    async def cases(self) -> list[dict[str, str]]:
        return [fields for _, fields in await self.redis.xrange(SUPPORT_CASES)]

    async def dead(self) -> list[dict[str, str]]:
        return [fields for _, fields in await self.redis.xrange(CONTACT_FORMS_DEAD)]

    async def wait_cases(self, count: int, timeout: float = WAIT_TIMEOUT) -> list[dict[str, str]]:
        async def probe() -> list[dict[str, str]] | None:
            found = await self.cases()
            return found if len(found) >= count else None

        return list(await wait_for(probe, timeout))

    async def settled(self) -> bool:
        """Every contact form read, acked and routed (none waiting for a retry)."""
        groups = await self.redis.xinfo_groups(CONTACT_FORMS)
        group = groups[0]
        read = int(group["pending"]) == 0 and int(group.get("lag") or 0) == 0
        return read and await self.redis.zcard(ROUTER_RETRY) == 0

    @contextlib.asynccontextmanager
    async def router(
        self, directory: Directory | None = None, **overrides: Any
    ) -> AsyncIterator[Router]:
        settings = router_settings(self.redis_url, **overrides)
        await ensure_group(self.redis)
        router = build_router(settings, self.redis, directory or RedisDirectory(self.redis))
        stop = asyncio.Event()
        tasks = [asyncio.create_task(loop(stop)) for loop in workers(router)]
        try:
            yield router
        finally:
            stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks), timeout=10)


@pytest.fixture
async def desk(redis: Redis, redis_server: RedisServer) -> Desk:
    return Desk(redis, redis_server.url)

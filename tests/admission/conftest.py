"""Fixtures: the admission app on the standalone test Redis, over real TCP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from tests.admission.helpers import admission_settings, seed_directory, serving


@pytest.fixture
async def api(redis: Redis, redis_server: Any) -> AsyncIterator[TestClient[Any, Any]]:
    """The app on the standalone test Redis, directory seeded with ALICE and BOB."""
    await seed_directory(redis)
    async with serving(admission_settings(redis_server.url)) as http:
        yield http

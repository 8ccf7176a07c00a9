"""A poller running in this event loop next to the sender harness (real Redis, real sandbox)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from prometheus_client import REGISTRY

from services.poller.app import Poller, build_poller, open_all, workers
from services.poller.settings import PollerSettings
from tests.conftest import TEST_TOKEN_KEYS
from tests.sender import conftest as sender_fixtures
from tests.sender.conftest import Stack, configured_providers
from tests.support.sandbox import SANDBOX_API_KEY

# The sender's harness fixtures (real Redis + an in-loop sandbox), shared with these tests.
sandbox_url = sender_fixtures.sandbox_url
stack = sender_fixtures.stack


def poller_settings(redis_url: str, provider_url: str, **overrides: Any) -> PollerSettings:
    values: dict[str, Any] = {
        "redis_url": redis_url,
        "provider_url": provider_url,
        "provider_api_key": SANDBOX_API_KEY,
        "token_keys": TEST_TOKEN_KEYS,
        "partitions": 4,
        "poll_interval_seconds": 0.05,
        "poll_max_requests_per_minute": 60_000,
        "poll_burst": 100,
        "reconcile_grace_seconds": 0.2,
        "reconcile_interval_seconds": 0.05,
        "close_interval_seconds": 0.05,
        "lease_seconds": 2,
        "connect_timeout_seconds": 1,
        "total_timeout_seconds": 2,
        "consumer_name": "test-poller",
    }
    values.update(overrides)
    return PollerSettings(**values)


@contextlib.asynccontextmanager
async def running_poller(
    stack: Stack, named: dict[str, str] | None = None, **overrides: Any
) -> AsyncIterator[Poller]:
    """The poller's loops in this event loop; ``named``: the RESETGATE_PROVIDERS-style
    variables of several providers (else the single-provider settings)."""
    settings = poller_settings(stack.redis_url, stack.provider_url, **overrides)
    stop = asyncio.Event()
    async with aiohttp.ClientSession() as session, contextlib.AsyncExitStack() as adapters:
        configured = configured_providers(settings, named)
        providers = await open_all(adapters, session, configured)
        poller = build_poller(settings, stack.redis, providers, configured)
        tasks = [asyncio.create_task(loop(stop)) for loop in workers(poller)]
        try:
            yield poller
        finally:
            stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks), timeout=10)


def sample(name: str, **labels: str) -> float:
    """A metric's current value in this process (0 when never touched)."""
    return REGISTRY.get_sample_value(name, labels) or 0.0

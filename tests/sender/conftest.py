"""A sender running in this event loop against a real Redis and a real sandbox over HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from unittest import mock

import aiohttp
import pytest
from redis.asyncio import Redis

from services.ctl.embedded import RedisServer
from services.poller.ambiguity import reconcile
from services.sender import intake
from services.sender.app import Opened, build_sender, open_all, workers
from services.sender.intake import ensure_groups
from services.sender.settings import SenderSettings
from services.sender.worker import Sender
from shared import clock
from shared.admit import Admitter
from shared.directory import Account, RedisDirectory
from shared.fastredis import fast_client
from shared.model import State
from shared.operations import load_operation
from shared.providers.base import Provider
from shared.providers.http import HttpProvider
from shared.providers.kind import ProviderConfig
from shared.providers.named import load_providers
from shared.replication import Replicas
from shared.scripts.attempts import BeginAttempt, Begun
from shared.settings import ProviderSettings
from shared.tokens import parse_keys
from tests.conftest import CLUSTER, TEST_TOKEN_KEYS
from tests.support.processes import WAIT_TIMEOUT
from tests.support.sandbox import SANDBOX_API_KEY, run_sandbox

# How long an idle reader's XREADGROUP blocks (intake.READ_BLOCK_MS, 2 s in a service): a
# stopping sender waits for its readers' blocked reads to return, so each sender a test ran
# cost up to 2 s more at its end (most tests here took 2.1 s or more for that alone).
READ_BLOCK_MS = 100


def sender_settings(redis_url: str, provider_url: str, **overrides: Any) -> SenderSettings:
    values: dict[str, Any] = {
        "redis_url": redis_url,
        "redis_cluster": CLUSTER,
        "provider_url": provider_url,
        "provider_api_key": SANDBOX_API_KEY,
        "token_keys": TEST_TOKEN_KEYS,
        "partitions": 4,
        "cooldown_seconds": 60,
        "provider_max_rate": 1000,
        "provider_burst": 50,
        "concurrency": 4,
        "lease_seconds": 5,
        "connect_timeout_seconds": 1,
        "total_timeout_seconds": 2,
        "backoff_base_seconds": 0.05,
        "backoff_cap_seconds": 0.2,
        "promote_interval_seconds": 0.05,
        "consumer_name": "test-sender",
    }
    values.update(overrides)
    return SenderSettings(**values)


def configured_providers(
    settings: ProviderSettings, named: dict[str, str] | None = None
) -> list[ProviderConfig]:
    """The providers a process with ``settings`` and, when given, the RESETGATE_PROVIDERS
    variables ``named`` in its environment configures."""
    with mock.patch.dict(os.environ, named or {}):
        return load_providers(settings)


class Stack:
    """Redis + sandbox + the ability to admit accounts and run senders."""

    def __init__(self, redis: Redis, redis_url: str, provider_url: str) -> None:
        self.redis = redis
        self.redis_url = redis_url
        self.provider_url = provider_url

    def settings(self, **overrides: Any) -> SenderSettings:
        return sender_settings(self.redis_url, self.provider_url, **overrides)

    async def admit(
        self,
        account_id: str,
        domain: str = "example.com",
        entry_point: str = "public",
        **overrides: Any,
    ) -> str:
        await RedisDirectory(self.redis).add(
            f"login-{account_id}", Account(account_id, f"{account_id}@{domain}")
        )
        settings = self.settings(**overrides)
        admission = await Admitter(self.redis, settings, parse_keys(TEST_TOKEN_KEYS)).admit(
            account_id, entry_point
        )
        return admission.operation_id

    @contextlib.asynccontextmanager
    async def sender(
        self,
        provider: Provider | None = None,
        named: dict[str, str] | None = None,
        **overrides: Any,
    ) -> AsyncIterator[Sender]:
        """``named``: a RESETGATE_PROVIDERS environment (several providers at once); else
        the single provider of the settings, sent through ``provider`` when given."""
        settings = self.settings(**overrides)
        await ensure_groups(self.redis, settings.partitions)
        stop = asyncio.Event()
        async with aiohttp.ClientSession() as session, contextlib.AsyncExitStack() as adapters:
            adapters.enter_context(mock.patch.object(intake, "READ_BLOCK_MS", READ_BLOCK_MS))
            configured = configured_providers(settings, named)
            if provider is None:
                opened = await open_all(adapters, session, configured)
            else:
                opened = [Opened(configured[0], provider, None)]
            # As the sender's wiring does: each email's commands on FastRedis's pipelined link
            # (standalone Redis, RESETGATE_FAST_REDIS), WAIT's per-node connections (Cluster)
            # closed.
            client = fast_client(self.redis, settings.fast_redis)
            if client is not self.redis:
                adapters.push_async_callback(client.aclose)
            replicas = Replicas(client, settings, settings.wait_replicas, settings.wait_timeout_ms)
            adapters.push_async_callback(replicas.close)
            sender = build_sender(settings, client, session, opened, replicas=replicas)
            await sender.refresh_control()
            tasks = [asyncio.create_task(loop(stop)) for loop in workers(sender)]
            try:
                yield sender
            finally:
                stop.set()
                await asyncio.wait_for(asyncio.gather(*tasks), timeout=10)

    async def reconcile(self, operation_id: str, **overrides: Any) -> Any:
        async with aiohttp.ClientSession() as session:
            settings = self.settings(**overrides)
            provider = HttpProvider(
                session, self.provider_url, SANDBOX_API_KEY, name=settings.provider_name
            )
            return await reconcile(self.redis, provider, settings, operation_id)

    async def abandoned_attempt(self, operation_id: str) -> Begun:
        """A worker that wrote its attempt and died before the provider call: its 1 ms lease
        has run out by the next begin, which finds the attempt ambiguous."""
        return await BeginAttempt(
            operation_id=operation_id,
            attempt_id="at-dead",
            now=clock.now_ms(),
            lease_ms=1,
            max_attempts=6,
            consumer="dead-worker",
            entry_id="",
            retention_ms=60_000,
        ).run(self.redis)

    async def wait_state(
        self, operation_id: str, states: set[State], timeout: float = WAIT_TIMEOUT
    ) -> Any:
        return await wait_for(lambda: self._state_in(operation_id, states), timeout)

    async def _state_in(self, operation_id: str, states: set[State]) -> Any:
        operation = await load_operation(self.redis, operation_id)
        return operation if operation and operation.state in states else None


async def wait_for(probe: Callable[[], Awaitable[Any]], timeout: float = WAIT_TIMEOUT) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await probe()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


@pytest.fixture
async def sandbox_url() -> AsyncIterator[str]:
    async with run_sandbox(delivered_delay_seconds=0.2) as url:
        yield url


@pytest.fixture
async def stack(redis: Redis, redis_server: RedisServer, sandbox_url: str) -> Stack:
    return Stack(redis, redis_server.url, sandbox_url)

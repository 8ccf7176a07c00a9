"""The Redis client every service uses: standalone or Cluster, with timeouts and retries.

Reconnects use exponential backoff with jitter, so a Redis restart costs a few failed calls
and log lines, never a crash loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

from redis.asyncio import BlockingConnectionPool, Redis, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from shared.logging import event
from shared.redis_policy import check_eviction_policy
from shared.settings import RedisSettings

log = logging.getLogger(__name__)

RedisClient = Redis | RedisCluster
T = TypeVar("T")
TRANSIENT_ERRORS = (RedisConnectionError, RedisTimeoutError, ConnectionError, OSError)


def _options(settings: RedisSettings) -> dict[str, Any]:
    return {
        "decode_responses": True,
        "socket_timeout": settings.redis_timeout_seconds,
        "socket_connect_timeout": settings.redis_timeout_seconds,
        # redis.asyncio's Retry: the synchronous one's call_with_retry returns the command's
        # coroutine un-awaited, so nothing was retried and every stale pooled connection
        # failed one call after a Redis restart (tests/outage/test_redis_client.py).
        "retry": Retry(ExponentialWithJitterBackoff(cap=2.0, base=0.05), 3),
        "health_check_interval": 15,
    }


def create_client(settings: RedisSettings) -> RedisClient:
    """A client for ``RESETGATE_REDIS_URL``; Cluster when ``RESETGATE_REDIS_CLUSTER`` is set."""
    if settings.redis_cluster:
        return RedisCluster.from_url(
            settings.redis_url,
            **{k: v for k, v in _options(settings).items() if k != "health_check_interval"},
        )
    # A blocking pool queues a burst behind a bounded number of connections instead of
    # failing it or opening thousands of sockets.
    pool = BlockingConnectionPool.from_url(
        settings.redis_url,
        max_connections=settings.redis_max_connections,
        timeout=settings.redis_timeout_seconds,
        **_options(settings),
    )
    # from_pool: the client owns the pool, so aclose() disconnects it (a plain
    # Redis(connection_pool=...) leaves every socket open until the process exits).
    return Redis.from_pool(pool)


async def connect(settings: RedisSettings, attempts: int = 30) -> RedisClient:
    """Create a client and wait (with a log line per try) until Redis answers."""

    async def answering_client() -> RedisClient:
        client = create_client(settings)
        try:
            await client.ping()
        except BaseException:
            await client.aclose()
            raise
        return client

    client = await until_done(
        answering_client,
        "connect",
        attempts,
        errors=(RedisError, *TRANSIENT_ERRORS),
        target=display_url(settings.redis_url),
    )
    await check_eviction_policy(client)
    return client


def display_url(url: str) -> str:
    """The Redis URL without its password: fit for a log line or a terminal."""
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname or ''}{port}{parts.path}"


async def until_done(
    step: Callable[[], Awaitable[T]],
    what: str,
    attempts: int = 30,
    errors: tuple[type[BaseException], ...] = TRANSIENT_ERRORS,
    target: str = "",
) -> T:
    """A startup step against Redis (connecting, creating consumer groups, reading control
    state), retried with capped backoff. Redis can go away, or pause writes for a failover,
    just after it answered a PING; that must cost a wait, not an exit."""
    delay = 0.1
    for attempt in range(1, attempts + 1):
        try:
            return await step()
        except errors as error:
            if attempt == attempts:
                break
            # The first line says where; after that one line in ten, not one per try.
            level = logging.WARNING if attempt % 10 == 1 else logging.DEBUG
            event(log, level, "redis not ready for startup yet", redis=target or None,
                  step=what, attempt=attempt, of=attempts, error=type(error).__name__,
                  retry_in_s=round(delay, 2))  # fmt: skip
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
    where = f" at {target}" if target else ""
    raise SystemExit(
        f"redis unreachable{where} at start ({what}, {attempts} tries): check RESETGATE_REDIS_URL"
    )


async def ping(client: RedisClient) -> bool:
    try:
        return bool(await client.ping())
    except (RedisError, *TRANSIENT_ERRORS):
        return False

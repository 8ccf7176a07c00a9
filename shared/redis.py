"""The Redis client every service uses: standalone, Sentinel or Cluster, with timeouts and
retries.

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
from redis.asyncio.connection import SSLConnection, parse_url
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from shared import tracing
from shared.logging import event
from shared.redis_policy import check_eviction_policy
from shared.settings import RedisSettings, redis_url_problem, sentinel_addresses

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


class SentinelRedis(Redis):
    """The primary Sentinel names: closing it closes the Sentinel connections too."""

    sentinel_manager: Sentinel | None = None

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        await super().aclose(close_connection_pool)
        # A borrowed single-connection client (``client()``) shares the pool, not the manager.
        if self.sentinel_manager is not None and close_connection_pool is not False:
            await self.sentinel_manager.aclose()


class _BlockingSentinelPool(SentinelConnectionPool, BlockingConnectionPool):
    """Sentinel's pool (it asks the Sentinels where the primary is, and drops connections
    to a demoted one) that queues a burst like the standalone pool instead of failing it."""


def _sentinel_client(settings: RedisSettings) -> SentinelRedis:
    """The primary the Sentinels name; every new connection asks them again, so a
    failover costs the calls in flight, never a restart."""
    data: dict[str, Any] = dict(parse_url(settings.redis_url))
    tls = data.pop("connection_class", None) is SSLConnection
    for named_by_sentinel in ("host", "port"):
        data.pop(named_by_sentinel, None)
    options = {**_options(settings), **data, "ssl": tls}
    sentinel_options: dict[str, Any] = {
        "socket_timeout": settings.redis_timeout_seconds,
        "socket_connect_timeout": settings.redis_timeout_seconds,
        "password": settings.redis_sentinel_password.get_secret_value() or data.get("password"),
        "decode_responses": True,
    }
    if settings.redis_sentinel_tls:
        sentinel_options.update({k: v for k, v in data.items() if k.startswith("ssl")}, ssl=True)
    sentinel = Sentinel(  # type: ignore[no-untyped-call]
        sentinel_addresses(settings.redis_sentinels), sentinel_kwargs=sentinel_options, **options
    )
    client: SentinelRedis = sentinel.master_for(
        settings.redis_sentinel_master,
        redis_class=SentinelRedis,
        connection_pool_class=_BlockingSentinelPool,
        max_connections=settings.redis_max_connections,
        timeout=settings.redis_timeout_seconds,
    )
    client.sentinel_manager = sentinel
    return client


def create_client(settings: RedisSettings) -> RedisClient:
    """A client for ``RESETGATE_REDIS_URL``; Cluster when ``RESETGATE_REDIS_CLUSTER`` is set,
    the primary the Sentinels name when ``RESETGATE_REDIS_SENTINELS`` is."""
    if settings.redis_sentinels:
        return _sentinel_client(settings)
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
        target=describe(settings),
    )
    await check_eviction_policy(client)
    if settings.trace_redis_commands:
        tracing.redis_commands(client)
    return client


def describe(settings: RedisSettings) -> str:
    """Which Redis, without password or Sentinel addresses: fit for a log line."""
    if settings.redis_sentinels:
        count = len(sentinel_addresses(settings.redis_sentinels))
        return f"sentinel master {settings.redis_sentinel_master!r} ({count} sentinels)"
    return display_url(settings.redis_url)


def display_url(url: str) -> str:
    """The Redis URL without its password: fit for a log line or a terminal; one that does
    not parse is named as such, never quoted (its password may be what broke it)."""
    if redis_url_problem(url):
        return "(a Redis URL that does not parse)"
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
            event(
                log,
                level,
                "redis not ready for startup yet",
                redis=target or None,
                step=what,
                attempt=attempt,
                of=attempts,
                error=type(error).__name__,
                retry_in_s=round(delay, 2),
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
    where = f" at {target}" if target else ""
    raise SystemExit(
        f"redis unreachable{where} at start ({what}, {attempts} tries): check RESETGATE_REDIS_URL"
    )


# Readiness answers within this, below the chart's probe timeout (2 s): a probe that times
# out says nothing, one that answers 503 says "not ready". A Redis loading its dataset
# answers a command only between chunks of the load, and every loop of a busy service is
# retrying then too: a PING left to the client's retries took longer than the probe.
PING_TIMEOUT_S = 1.0


async def ping(client: RedisClient) -> bool:
    """Whether Redis answers a PING: False for one that is down, failing over, or loading
    (BusyLoadingError), and for one that does not answer within PING_TIMEOUT_S."""
    try:
        async with asyncio.timeout(PING_TIMEOUT_S):
            return bool(await client.ping())
    except (RedisError, TimeoutError, *TRANSIENT_ERRORS):
        return False

"""The services' Redis client reconnects by itself after a Redis restart.

Every pooled connection is dead after a restart. The client's retry (exponential backoff
with jitter) must reconnect and run the command, so the first call after Redis is back
succeeds. With redis-py's *synchronous* ``Retry`` on the asyncio client, ``call_with_retry``
returned the un-awaited coroutine: nothing was retried, every stale connection in the pool
failed one command (a 503 from admission, an interrupted attempt in the sender, a readiness
probe saying "down") after Redis had already recovered.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from redis.asyncio import Redis
from redis.asyncio.retry import Retry

from services.ctl.embedded import RedisServer
from shared.redis import create_client, ping
from shared.settings import CommonSettings


@pytest.fixture
def restartable() -> Iterator[RedisServer]:
    server = RedisServer(appendonly=True).start()
    yield server
    server.stop()


async def test_first_command_after_a_redis_restart_succeeds(restartable: RedisServer) -> None:
    client = create_client(CommonSettings(redis_url=restartable.url))
    assert isinstance(client, Redis)
    try:
        await client.set("before", "1")
        restartable.restart()
        assert await client.get("before") == "1"
        assert await ping(client)
    finally:
        await client.aclose()


def test_the_client_retries_with_the_asyncio_retry() -> None:
    client = create_client(CommonSettings())
    assert isinstance(client, Redis)
    retry = client.connection_pool.connection_kwargs["retry"]
    assert isinstance(retry, Retry)

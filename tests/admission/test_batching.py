"""BatchingRedis against a real Redis: shared round trips, per-caller replies and errors."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError
from redis.retry import Retry

from services.admission.batching import BatchingRedis, hot_path_client
from services.ctl.embedded import RedisServer, free_port
from shared.scripts import Script


@pytest.fixture
async def batched(redis: Redis, redis_server: RedisServer) -> Any:
    inner = Redis.from_url(redis_server.url, decode_responses=True)
    yield BatchingRedis(inner)
    await inner.aclose()


async def test_concurrent_callers_get_their_own_replies_and_errors(batched: BatchingRedis) -> None:
    await batched.hset("h", mapping={"a": "1", "b": "2"})
    await batched.set("s", "x")
    results = await asyncio.gather(
        batched.hgetall("h"),
        batched.get("s"),
        batched.hmget("h", ["a", "zz"]),
        batched.incr("s"),  # not an integer: this caller's error only
        batched.evalsha("0" * 40, 0),
        batched.zrange("nothing", 0, -1, withscores=True),
        return_exceptions=True,
    )
    assert results[0] == {"a": "1", "b": "2"}  # response callbacks still apply
    assert results[1] == "x"
    assert results[2] == ["1", None]
    assert isinstance(results[3], ResponseError)
    assert isinstance(results[4], NoScriptError)
    assert results[5] == []


async def test_scripts_reload_through_the_batch(batched: BatchingRedis, redis: Redis) -> None:
    gcra = Script("gcra")
    await redis.script_flush()
    replies = await asyncio.gather(*(gcra(batched, [f"k{i}"], [1000, 2]) for i in range(20)))
    assert replies == [[1, 0]] * 20


async def test_many_callers_share_a_few_round_trips(batched: BatchingRedis, redis: Redis) -> None:
    before = int((await redis.info("stats"))["total_connections_received"])
    await asyncio.gather(*(batched.set(f"k{i}", i) for i in range(500)))
    assert await redis.dbsize() == 500
    # One pipeline per loop iteration, not one pooled connection per concurrent caller.
    opened = int((await redis.info("stats"))["total_connections_received"]) - before
    assert opened <= 2


async def test_a_failed_round_trip_fails_every_caller_in_it() -> None:
    inner = Redis(port=free_port(), socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0))
    batched = BatchingRedis(inner)
    results = await asyncio.gather(batched.get("a"), batched.get("b"), return_exceptions=True)
    assert all(isinstance(r, RedisConnectionError | OSError) for r in results), results
    await inner.aclose()


async def test_blocking_commands_get_an_unbatched_connection(batched: BatchingRedis) -> None:
    single = batched.client()
    assert not isinstance(single, BatchingRedis)
    assert await single.wait(0, 10) == 0
    await single.aclose(close_connection_pool=False)


def test_cluster_clients_are_used_as_they_are() -> None:
    from redis.asyncio import RedisCluster

    cluster = RedisCluster(host="127.0.0.1", port=free_port())
    assert hot_path_client(cluster) is cluster

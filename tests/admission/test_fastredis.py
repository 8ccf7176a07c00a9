"""FastRedis against real redis-server processes: shared round trips, per-caller replies and
errors, reply order under concurrency, script reloads, restarts, pauses and timeouts."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator, Callable, Iterator

import pytest
from redis.asyncio import Redis, RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import DataError, NoScriptError, RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from services.ctl.embedded import RedisServer, cleanup_directory, free_port
from shared.fastredis import FastRedis, fast_client, pack
from shared.keys import PartitionKeys
from shared.redis import create_client
from shared.scripts.admission import Gcra
from shared.settings import CommonSettings
from tests.admission.helpers import (
    ALICE,
    admission_settings,
    internal_admit,
    public,
    seed_directory,
    serving,
)


@pytest.fixture
async def fast(redis: Redis, redis_server: RedisServer) -> AsyncIterator[FastRedis]:
    inner = create_client(CommonSettings(redis_url=redis_server.url))
    assert isinstance(inner, Redis)
    client = FastRedis(inner)
    yield client
    await client.aclose()
    await inner.aclose()


@pytest.fixture
def own_server() -> Iterator[RedisServer]:
    """A redis-server of this test's own, to stop, restart and pause."""
    server = RedisServer().start()
    yield server
    if server.process is not None and server.process.poll() is None:
        os.kill(server.process.pid, signal.SIGCONT)
    server.stop()
    cleanup_directory(server.directory)


@pytest.fixture
async def own_fast(own_server: RedisServer) -> AsyncIterator[FastRedis]:
    inner = create_client(CommonSettings(redis_url=own_server.url, redis_timeout_seconds=0.5))
    assert isinstance(inner, Redis)
    client = FastRedis(inner)
    yield client
    await client.aclose()
    await inner.aclose()


async def test_concurrent_callers_get_their_own_replies_and_errors(fast: FastRedis) -> None:
    await fast.hset("h", mapping={"a": "1", "b": "2"})
    await fast.set("s", "x")
    results = await asyncio.gather(
        fast.hgetall("h"),
        fast.get("s"),
        fast.hmget("h", ["a", "zz"]),
        fast.incr("s"),  # not an integer: this caller's error only
        fast.evalsha("0" * 40, 0),
        fast.zrange("nothing", 0, -1, withscores=True),
        fast.get("missing"),
        return_exceptions=True,
    )
    assert results[0] == {"a": "1", "b": "2"}
    assert results[1] == "x"
    assert results[2] == ["1", None]
    assert isinstance(results[3], ResponseError)
    assert isinstance(results[4], NoScriptError)
    assert results[5] == []
    assert results[6] is None


async def test_replies_match_the_plain_client(fast: FastRedis, redis: Redis) -> None:
    """Same RESP version, same callbacks: what a caller gets does not depend on the client."""
    await redis.hset("h", mapping={"a": "1"})
    await redis.zadd("z", {"m": 1.5})
    for command in (
        lambda c: c.hgetall("h"),
        lambda c: c.zrange("z", 0, -1, withscores=True),
        lambda c: c.set("k", "v"),
        lambda c: c.ping(),
        lambda c: c.exists("h", "nope"),
        lambda c: c.script_load("return 1"),
        lambda c: c.info("server"),
    ):
        plain, fast_reply = await command(redis), await command(fast)
        if isinstance(plain, dict) and "uptime_in_seconds" in plain:
            assert plain.keys() == fast_reply.keys()
        else:
            assert fast_reply == plain


async def test_replies_keep_their_order_under_concurrency(fast: FastRedis) -> None:
    """Thousands of interleaved commands from many callers: each reply reaches its caller."""

    async def caller(i: int) -> None:
        for step in range(20):
            assert await fast.incr(f"counter:{i}") == step + 1
            assert await fast.get(f"counter:{i}") == str(step + 1)
            assert await fast.hmget("missing", [f"f{i}"]) == [None]

    await asyncio.gather(*(caller(i) for i in range(100)))
    # One counter, many writers in one loop turn: issue order is reply order.
    assert await asyncio.gather(*(fast.incr("shared") for _ in range(1000))) == list(range(1, 1001))


async def test_many_callers_share_one_connection(fast: FastRedis, redis: Redis) -> None:
    before = int((await redis.info("stats"))["total_connections_received"])
    await asyncio.gather(*(fast.set(f"k{i}", i) for i in range(500)))
    assert await redis.dbsize() == 500
    opened = int((await redis.info("stats"))["total_connections_received"]) - before
    assert opened <= 1


async def test_scripts_reload_after_script_flush(fast: FastRedis, redis: Redis) -> None:
    gcra = Gcra.SCRIPT
    assert await gcra(fast, ["warm"], [1000, 2]) == [1, 0]
    await redis.script_flush()
    replies = await asyncio.gather(*(gcra(fast, [f"k{i}"], [1000, 2]) for i in range(20)))
    assert replies == [[1, 0]] * 20


async def test_a_batch_after_script_flush_runs_each_call_once(
    fast: FastRedis, redis: Redis
) -> None:
    """redis-py loads a missing script before the pipeline runs: no call of a batch runs twice
    (a burst of 1 allows each key once, so a second run would answer "limited")."""
    gcra = Gcra.SCRIPT
    await redis.script_flush()
    calls = [([f"once{i}"], [60_000, 1]) for i in range(20)]
    assert await gcra.many(fast, calls) == [[1, 0]] * 20
    assert (await gcra.many(fast, calls))[0][0] == 0  # the same keys again: limited


async def test_bad_arguments_are_data_errors_like_redis_py(fast: FastRedis) -> None:
    with pytest.raises(DataError):
        await fast.set("k", None)  # type: ignore[arg-type]
    bad = fast.hmget("h", [True])  # the error comes on await, as with redis-py
    with pytest.raises(DataError):
        await bad
    assert await fast.ping()  # and the connection is still in step


async def test_connection_state_commands_get_their_own_connection(fast: FastRedis) -> None:
    single = fast.client()
    assert not isinstance(single, FastRedis)
    assert await single.wait(0, 10) == 0
    await single.aclose(close_connection_pool=False)
    assert await fast.wait(0, 10) == 0  # through the pool, never the shared connection
    async with fast.pipeline(transaction=True) as pipe:
        assert await pipe.set("t", "1").get("t").execute() == [True, "1"]


async def test_nothing_listening_fails_every_caller_then_backs_off() -> None:
    inner = create_client(
        CommonSettings(redis_url=f"redis://127.0.0.1:{free_port()}/0", redis_timeout_seconds=0.5)
    )
    assert isinstance(inner, Redis)
    client = FastRedis(inner)
    results = await asyncio.gather(client.get("a"), client.get("b"), return_exceptions=True)
    assert all(isinstance(r, RedisConnectionError) for r in results), results
    # Inside the backoff: the error says so, with no new connect attempt (a fixed 50 ms bound
    # on how long that took failed on a loaded machine; the message is what tells the paths).
    with pytest.raises(RedisConnectionError, match="reconnecting"):
        await client.get("c")
    await client.aclose()
    await inner.aclose()


async def test_a_call_on_a_connection_lost_after_it_was_handed_out_fails_at_once(
    own_fast: FastRedis, own_server: RedisServer
) -> None:
    """A caller that waited for a (re)connect resumes a few loop iterations after it
    completed; Redis may have closed the connection meanwhile (a crash mid-restart, a
    ``CLIENT KILL``). Its command must fail, not wait forever for an answer that cannot come:
    every public request shares this connection, so one such wait (in the handshake, say)
    would stall them all."""
    assert await own_fast.ping()
    handed_out = own_fast._link.protocol
    assert handed_out is not None
    async with Redis(host="127.0.0.1", port=own_server.port) as other:
        assert await other.client_kill_filter(_type="normal", skipme=True) >= 1
    for _ in range(100):
        if handed_out.closed:
            break
        await asyncio.sleep(0.01)
    assert handed_out.closed
    with pytest.raises(RedisConnectionError):
        await asyncio.wait_for(handed_out.send(pack(("PING",), own_fast._link.encoder)), 2.0)
    assert await own_fast.ping()  # and the next call reconnects


async def _until(condition: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached in time")


RECOVERED = 50  # consecutive successful calls after the restart: recovered, and stayed so


async def _traffic(
    client: FastRedis, outcomes: list[str], restarted: asyncio.Event, deadline: float = 60
) -> None:
    """One GET every millisecond or so, each outcome "ok" or the error's class name, until
    RECOVERED calls in a row succeeded after ``restarted``; gives up after ``deadline``."""
    give_up = time.monotonic() + deadline
    while time.monotonic() < give_up:
        if restarted.is_set() and outcomes[-RECOVERED:] == ["ok"] * RECOVERED:
            return
        try:
            await client.get("k")
            outcomes.append("ok")
        except RedisError as error:
            outcomes.append(type(error).__name__)
        await asyncio.sleep(0.001)


async def test_a_redis_restart_mid_traffic_fails_calls_then_recovers(
    own_server: RedisServer, own_fast: FastRedis
) -> None:
    gcra = Gcra.SCRIPT
    assert await gcra(own_fast, ["k"], [1000, 5]) == [1, 0]
    kinds: list[str] = []
    restarted = asyncio.Event()
    traffic = asyncio.create_task(_traffic(own_fast, kinds, restarted))
    await _until(lambda: len(kinds) >= 10)  # calls are flowing (not a sleep: load varies)
    await asyncio.to_thread(own_server.stop, True)  # SIGKILL: connections drop
    await _until(lambda: "ConnectionError" in kinds)
    await asyncio.to_thread(own_server.start)  # same port, empty script cache
    restarted.set()
    await traffic
    assert kinds[0] == "ok"
    assert "ConnectionError" in kinds
    assert set(kinds) <= {"ok", "ConnectionError", "TimeoutError"}, set(kinds)
    assert kinds[-RECOVERED:] == ["ok"] * RECOVERED  # recovered, and stayed recovered
    assert await gcra(own_fast, ["k2"], [1000, 5]) == [1, 0]  # NOSCRIPT -> load -> retry


async def test_a_paused_redis_times_out_instead_of_hanging(
    own_server: RedisServer, own_fast: FastRedis
) -> None:
    assert own_server.process is not None
    assert await own_fast.ping()
    os.kill(own_server.process.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        results = await asyncio.gather(
            *(own_fast.get(f"k{i}") for i in range(10)), return_exceptions=True
        )
        waited = time.monotonic() - started
        assert all(isinstance(r, RedisTimeoutError) for r in results), results
        # The 0.5 s timeout, not a hang (a starved event loop may take seconds more).
        assert 0.4 <= waited < 10
        later = await asyncio.gather(own_fast.get("x"), return_exceptions=True)
        assert isinstance(later[0], RedisTimeoutError | RedisConnectionError)
    finally:
        os.kill(own_server.process.pid, signal.SIGCONT)
    await asyncio.sleep(0.1)
    for _ in range(50):  # back within the backoff cap
        try:
            assert await own_fast.ping()
            break
        except RedisError:
            await asyncio.sleep(0.1)
    assert await own_fast.set("after", "1")
    assert await own_fast.get("after") == "1"


async def test_a_caller_that_gives_up_leaves_the_connection_in_step(fast: FastRedis) -> None:
    await fast.set("a", "1")
    slow = asyncio.ensure_future(fast.get("a"))
    slow.cancel()
    assert await asyncio.gather(fast.get("a"), fast.incr("n")) == ["1", 1]


def test_only_standalone_tcp_and_unix_clients_are_wrapped() -> None:
    cluster = RedisCluster(host="127.0.0.1", port=free_port())
    assert fast_client(cluster) is cluster
    tls = Redis.from_url(f"rediss://127.0.0.1:{free_port()}/0")
    assert fast_client(tls) is tls


async def test_fast_client_wraps_a_standalone_client(redis_server: RedisServer) -> None:
    inner = create_client(CommonSettings(redis_url=redis_server.url))
    client = fast_client(inner)
    assert isinstance(client, FastRedis)
    assert await client.ping() is True
    await client.aclose()
    await inner.aclose()


@pytest.mark.parametrize("fast_redis", ["true", "false"])
async def test_admission_behaves_the_same_with_fastredis_on_and_off(
    fast_redis: str, redis: Redis, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RESETGATE_FAST_REDIS=false (plain redis-py, the way out if a redis upgrade breaks the
    internals fastredis uses) serves the same answers as the pipelined client."""
    monkeypatch.setenv("RESETGATE_FAST_REDIS", fast_redis)
    settings = admission_settings(redis_server.url)
    inner = create_client(settings)
    assert isinstance(fast_client(inner, settings.fast_redis), FastRedis) is (fast_redis == "true")
    await inner.aclose()
    await seed_directory(redis)
    async with serving(settings) as http:
        assert (await public(http, ALICE[0])).status == 202
        first = await (await internal_admit(http, ALICE[1].account_id)).json()
        again = await (await internal_admit(http, ALICE[1].account_id)).json()
    assert first["result"] == "converged"  # the public request created it
    assert again["operation_id"] == first["operation_id"]
    op = first["operation_id"]
    account = PartitionKeys.of(op).account(ALICE[1].account_id)
    assert await redis.hget(account, "last") == op  # one operation, created once

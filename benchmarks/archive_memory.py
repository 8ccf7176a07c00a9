"""Benchmark: Redis memory per settled operation, without the archive and with it after the
tail (the aim: at most a tenth of what an operation costs without the archive).

    PYTHONPATH=. .venv/bin/python benchmarks/archive_memory.py [--operations 5000]

Starts a PostgreSQL, then twice, each time on a new redis-server, takes ``--operations``
operations (one account each) through the scripts the services run (admit, begin, finalise
as accepted, with a provider message id, the send stream entry acknowledged and deleted as
the sender does; tests/archive/conftest.py Settler): once with the archive off (today: each
kept for RETENTION_SECONDS), once with it on, archived by the archiver's own code with a 1 s
tail, after which Redis has let them go and the poller's housekeeping (windows closed, stale
message-map entries dropped) has run. Before counting, a few operations are taken the same
way (ended failed: no delivery window) so the scripts, streams and groups exist. Prints
used_memory per operation for each, its keyspace part (less client buffers and the script
cache: MEMORY STATS), and what is left by key shape. A benchmark: prints figures, checks
nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import re
from collections import Counter

from redis.asyncio import Redis

from benchmarks import figures
from services.ctl.embedded import RedisServer, free_port
from services.ctl.localpg import LocalPostgres
from services.poller.observation import forget_stale_messages
from shared import archive_schema as schema
from shared import clock
from shared.keys import PartitionKeys
from shared.scripts.observation import CloseObservation
from tests.archive.conftest import Settler
from tests.archive.helpers import archiver, drain, until

WARM_UP = 20
# MEMORY STATS entries that do not grow with the operations kept.
FIXED = (
    "startup.allocated",
    "replication.backlog",
    "clients.slaves",
    "clients.normal",
    "cluster.links",
    "aof.buffer",
    "lua.caches",
    "functions.caches",
)


async def used_memory(redis: Redis) -> tuple[int, int]:
    """used_memory, and the keyspace's part of it: less what does not grow with operations
    (client buffers, the script cache, the server's start-up allocation)."""
    stats = await redis.memory_stats()
    total = int(stats["total.allocated"])
    return total, total - sum(int(stats.get(name) or 0) for name in FIXED)


def per_operation(now: tuple[int, int], before: tuple[int, int], n: int) -> tuple[float, float]:
    return (now[0] - before[0]) / n, (now[1] - before[1]) / n


async def key_shapes(redis: Redis, limit: int = 8) -> list[str]:
    """Every key left, grouped by shape (partition tag and ids generalised), biggest first:
    MEMORY USAGE summed, and how many keys."""
    size: Counter[str] = Counter()
    count: Counter[str] = Counter()
    async for key in redis.scan_iter(count=1000):
        shape = re.sub(r"\{\d+\}", "{p}", key)
        shape = re.sub(r"op-\d+-\w+", "<op>", shape)
        shape = re.sub(r"(rgdir:acct:|:acct:).*", r"\1<account>", shape)
        size[shape] += int(await redis.memory_usage(key, samples=0) or 0)
        count[shape] += 1
    return [f"{b:>9} B {count[s]:>6} x {s}" for s, b in size.most_common(limit)]


async def one_pass(
    operations: int, dsn: str, enabled: bool
) -> tuple[tuple[float, float], list[str]]:
    server = RedisServer().start()
    redis = Redis.from_url(server.url, decode_responses=True)
    try:
        settler = Settler(redis, server.url, archive_enabled=enabled)
        for i in range(WARM_UP):
            await settler.settle(f"acct-warm-{i}", "failed")
        await archived_and_gone(settler, dsn, enabled)
        before = await used_memory(redis)
        for i in range(operations):
            await settler.settle(f"acct-mem-{i}", "accepted")
        await archived_and_gone(settler, dsn, enabled)
        return per_operation(await used_memory(redis), before, operations), await key_shapes(redis)
    finally:
        await redis.aclose()
        server.stop()


async def archived_and_gone(settler: Settler, dsn: str, enabled: bool) -> None:
    """With the archive on: archived with a 1 s tail, gone from Redis, housekeeping done."""
    if not enabled:
        return
    async with archiver(settler, dsn, archive_tail_seconds=1) as worker:
        await drain(worker, settler, timeout=600)
    # Accepted operations stay until their observation window (60 s here) + tail.
    await until(lambda: _expired(settler.redis), timeout=180)
    await poller_housekeeping(settler.redis, settler.settings.partitions)


async def poller_housekeeping(redis: Redis, partitions: int) -> None:
    """What the running poller does meanwhile: close the windows that ended
    (close_observation.lua) and drop message-map entries of operations that are gone."""
    now = clock.now_ms()
    for p in range(partitions):
        due = await redis.zrangebyscore(PartitionKeys(p).observe, "-inf", now)
        if due:
            await CloseObservation(partition=p, now=now, operation_ids=tuple(due)).run(redis)
        cursor = None
        while cursor != 0:
            cursor, _ = await forget_stale_messages(redis, p, cursor or 0)


async def _expired(redis: Redis) -> bool:
    return not [k async for k in redis.scan_iter(match="*:op:*", count=1000)]


async def migrated(dsn: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        await schema.migrate(conn)
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--operations", type=int, default=5000)
    args = parser.parse_args()
    postgres = LocalPostgres(free_port()).start()
    try:
        asyncio.run(migrated(postgres.dsn))
        (off, off_keys), _ = asyncio.run(one_pass(args.operations, postgres.dsn, False))
        (on, on_keys), left = asyncio.run(one_pass(args.operations, postgres.dsn, True))
    finally:
        postgres.close()
    print(
        f"{args.operations} settled operations, used_memory per operation (keyspace part): "
        f"archive off {off:.0f} B ({off_keys:.0f} B); archive on, after the tail {on:.0f} B "
        f"({on_keys:.0f} B): {on / off:.1%} ({on_keys / off_keys:.1%})"
    )
    for line in left:
        print(f"  left: {line}")
    figures.emit(
        {
            "Redis per settled operation, archive off": f"{off:.0f} B",
            "archive on, after the tail": f"{on:.0f} B ({on / off:.1%})",
        }
    )


if __name__ == "__main__":
    main()

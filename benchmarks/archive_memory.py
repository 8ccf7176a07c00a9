"""Benchmark: Redis memory per settled operation, without the archive and with it after the
tail (issue: at most a tenth of the ~1.2 KiB an operation costs today).

    .venv/bin/python benchmarks/archive_memory.py [--operations 5000]

Starts a redis-server and a PostgreSQL, then twice takes ``--operations`` operations (one
account each) through the scripts the services run (admit, begin, finalise as accepted, with
a provider message id; tests/archive/conftest.py Settler): once with the archive off (today:
each kept for RETENTION_SECONDS), once with it on, archived by the archiver's own code with a
1 s tail, after which Redis has let them go and the poller's housekeeping (windows closed,
stale message-map entries dropped) has run. Prints used_memory per operation for each. A
benchmark: prints figures, checks nothing.
"""

from __future__ import annotations

import argparse
import asyncio

from redis.asyncio import Redis

from services.ctl.embedded import RedisServer, free_port
from services.ctl.localpg import LocalPostgres
from services.poller.observation import forget_stale_messages
from shared import archive_schema as schema
from shared import clock
from shared.keys import PartitionKeys
from shared.scripts.observation import CloseObservation
from tests.archive.conftest import Settler
from tests.archive.helpers import archiver, drain, until


async def used(redis: Redis) -> int:
    return int((await redis.info("memory"))["used_memory"])


async def run(operations: int, redis_url: str, dsn: str) -> tuple[float, float]:
    redis = Redis.from_url(redis_url, decode_responses=True)
    try:
        per_op = []
        for enabled in (False, True):
            await redis.flushall()
            settler = Settler(redis, redis_url, archive_enabled=enabled)
            before = await used(redis)
            for i in range(operations):
                await settler.settle(f"acct-mem-{i}", "accepted")
            if enabled:
                async with archiver(settler, dsn, archive_tail_seconds=1) as worker:
                    await drain(worker, settler, timeout=600)
                # Accepted operations stay until their observation window (60 s here) + tail.
                await until(lambda: _expired(redis), timeout=180)
                await poller_housekeeping(redis, settler.settings.partitions)
            per_op.append((await used(redis) - before) / operations)
        return per_op[0], per_op[1]
    finally:
        await redis.aclose()


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
    redis = RedisServer().start()
    postgres = LocalPostgres(free_port()).start()
    try:
        asyncio.run(migrated(postgres.dsn))
        off, on = asyncio.run(run(args.operations, redis.url, postgres.dsn))
    finally:
        postgres.close()
        redis.stop()
    print(f"{args.operations} settled operations, used_memory per operation: archive off "
          f"{off:.0f} B; archive on, after the tail {on:.0f} B ({on / off:.1%})")  # fmt: skip


if __name__ == "__main__":
    main()

"""Due promoter cost as the due set grows: it must stay flat (O(batch), not O(set)).

    .venv/bin/python benchmarks/promoter.py

Fills one partition's due set with 10^4 and then 10^6 future retries plus a fixed number
that are due now, and times promote_due() moving the due ones (batches of 200).
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from redis.asyncio import Redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import figures
from services.ctl.embedded import RedisServer
from shared import clock
from shared.keys import PartitionKeys
from shared.operations import promote_due

DUE_NOW = 2000
BATCH = 200


async def fill(client: Redis, scheduled: int) -> None:
    pk = PartitionKeys(0)
    now = clock.now_ms()
    for start in range(0, scheduled, 50_000):
        async with client.pipeline(transaction=False) as pipe:
            members = {
                f"op-0-F{i:025d}": now + 3_600_000 + i
                for i in range(start, min(scheduled, start + 50_000))
            }
            pipe.zadd(pk.due, members)
            await pipe.execute()
    async with client.pipeline(transaction=False) as pipe:
        for i in range(DUE_NOW):
            op = f"op-0-D{i:025d}"
            pipe.hset(pk.operation(op), mapping={"operation_id": op, "state": "deferred"})
            pipe.zadd(pk.due, {op: now - 1000 + i % 500})
        await pipe.execute()


async def measure(scheduled: int) -> tuple[int, float, float]:
    server = RedisServer().start()
    client = Redis.from_url(server.url, decode_responses=True)
    try:
        await fill(client, scheduled)
        timings = []
        moved = 0
        while True:
            started = time.perf_counter()
            count = await promote_due(client, 0, clock.now_ms(), BATCH)
            timings.append(time.perf_counter() - started)
            if not count:
                break
            moved += count
        timings = timings[:-1] or timings
        return moved, sum(timings) / len(timings) * 1000, max(timings) * 1000
    finally:
        await client.aclose()
        server.stop()


def main() -> None:
    print(
        f"{'scheduled':>10} {'due now':>8} {'moved':>6} {'mean ms/batch':>14} {'max ms':>7} "
        f"{'us/op':>6}"
    )
    shown = {}
    for scheduled in (10_000, 1_000_000):
        moved, mean_ms, max_ms = asyncio.run(measure(scheduled))
        label = f"ms per batch of {BATCH}, {scheduled:,} scheduled"
        shown[label] = f"{mean_ms:.2f} (max {max_ms:.2f})"
        print(
            f"{scheduled:>10} {DUE_NOW:>8} {moved:>6} {mean_ms:>14.2f} {max_ms:>7.2f} "
            f"{mean_ms * 1000 / BATCH:>6.1f}"
        )
    figures.emit(shown)


if __name__ == "__main__":
    main()

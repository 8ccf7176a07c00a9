"""What an admission acknowledgement is worth when Redis dies, per AOF fsync policy.

The real admission process is driven flat out through its internal API (every 201 carries
the operation id it acknowledged); Redis is then SIGKILLed at a random moment - as a
process, or as a host (unsynced AOF writes lost, see crashable_redis.py) - and restarted,
and every acknowledged operation is looked up. Several crashes per configuration, one
admission process throughout (it reconnects by itself). Prints one row per configuration:
acknowledged-then-lost (total and worst crash), how long before the crash the oldest lost
acknowledgement was given, and the acknowledged rate and latency under that policy.

``appendfsync always`` must lose nothing in any crash; ``everysec`` is measured, not judged
(docs/reliability.md has the figures and the trade-off). Redis 7.0 has no WAITAOF, so
admission cannot wait for the local fsync under ``everysec``: durable acknowledgements
need ``always`` or replicas with RESETGATE_WAIT_REPLICAS.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest
from redis.asyncio import Redis

from shared.keys import PartitionKeys
from tests.chaos.crashable_redis import Crash, CrashableRedis, volatile_cache
from tests.chaos.run import seed
from tests.chaos.stack import INTERNAL_TOKEN, account_id, seed_directory, service_env
from tests.support.processes import Processes

CRASHES = 5
ACCOUNTS_PER_CRASH = 10_000
CONCURRENCY = 32


@dataclass
class Crashed:
    acknowledged: dict[str, float] = field(default_factory=dict)  # op id -> acked at
    latencies: list[float] = field(default_factory=list)
    started: float = 0.0
    crashed_at: float = 0.0


async def drive(url: str, first: int, stop: asyncio.Event, run: Crashed) -> None:
    """Admit fresh accounts from ``first`` on, CONCURRENCY at a time, until ``stop``."""
    headers = {"Authorization": f"Bearer {INTERNAL_TOKEN}"}
    counter = iter(range(first, first + ACCOUNTS_PER_CRASH))

    async def worker(session: aiohttp.ClientSession) -> None:
        for index in counter:
            if stop.is_set():
                return
            body = {"account_id": account_id(index), "entry_point": "automation"}
            began = time.monotonic()
            try:
                async with session.post(url, json=body, headers=headers) as response:
                    answer = await response.json(content_type=None)
            except (aiohttp.ClientError, TimeoutError):
                continue
            if response.status == 201 and not stop.is_set():
                run.acknowledged[answer["operation_id"]] = time.monotonic()
                run.latencies.append(time.monotonic() - began)

    timeout = aiohttp.ClientTimeout(total=5)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        await asyncio.gather(*(worker(session) for _ in range(CONCURRENCY)))


async def one_crash(
    server: CrashableRedis, admission_url: str, first: int, rng: random.Random
) -> tuple[Crashed, list[float]]:
    """Drive, crash Redis at a random moment, restart it; (the run, ages of lost acks)."""
    run, stop = Crashed(), asyncio.Event()
    run.started = time.monotonic()
    url = admission_url + "/internal/v1/recovery-operations"
    driving = asyncio.create_task(drive(url, first, stop, run))
    await asyncio.sleep(2.0 + rng.uniform(0, 1.5))
    run.crashed_at = time.monotonic()
    await asyncio.to_thread(server.crash)
    stop.set()  # answers arriving after the crash are not counted as acknowledged
    await driving
    await server.start_async()
    client = Redis.from_url(server.url, decode_responses=True)
    try:
        ops = list(run.acknowledged)
        async with client.pipeline(transaction=False) as pipe:
            for op in ops:
                pipe.exists(PartitionKeys.of(op).operation(op))
            found = await pipe.execute()
    finally:
        await client.aclose()
    missing = [op for op, exists in zip(ops, found, strict=True) if not exists]
    return run, [run.crashed_at - run.acknowledged[op] for op in missing]


async def measure(tmp_path: Path, appendfsync: str, crash: Crash) -> dict[str, object]:
    rng = random.Random(seed())
    server = CrashableRedis(appendfsync, crash)
    await server.start_async()
    try:
        client = Redis.from_url(server.url, decode_responses=True)
        await seed_directory(client, CRASHES * ACCOUNTS_PER_CRASH)
        await client.aclose()
        env = service_env(server.url, "http://127.0.0.1:9", "WARNING")
        async with Processes(tmp_path, env) as processes:
            admission = await processes.start("admission", timeout=60)
            crashes = []
            for n in range(CRASHES):
                await admission.wait_ready(60)  # it reconnects by itself after each crash
                crashes.append(await one_crash(server, admission.url, n * ACCOUNTS_PER_CRASH, rng))
            return summarise(appendfsync, crash, crashes)
    finally:
        await server.stop_async()


def summarise(
    appendfsync: str, crash: Crash, crashes: list[tuple[Crashed, list[float]]]
) -> dict[str, object]:
    latencies = sorted(x for run, _ in crashes for x in run.latencies)
    acked = sum(len(run.acknowledged) for run, _ in crashes)
    seconds = sum(run.crashed_at - run.started for run, _ in crashes)
    lost = [len(ages) for _, ages in crashes]
    ages = [age for _, lost_ages in crashes for age in lost_ages]
    return {
        "appendfsync": appendfsync,
        "crash": str(crash),
        "crashes": len(crashes),
        "acknowledged": acked,
        "lost_total": sum(lost),
        "lost_per_crash": lost,
        "oldest_lost_ack_s": round(max(ages), 3) if ages else None,
        "acks_per_s": round(acked / seconds),
        "p50_ms": round(1000 * statistics.median(latencies), 1),
        "p99_ms": round(1000 * latencies[int(len(latencies) * 0.99)], 1),
    }


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    "crash",
    [
        Crash.PROCESS,
        pytest.param(
            Crash.HOST, marks=pytest.mark.skipif(volatile_cache() is None, reason="no C compiler")
        ),
    ],
)
@pytest.mark.parametrize("appendfsync", ["everysec", "always"])
async def test_invariant_10_acknowledged_admissions_across_redis_crashes(
    tmp_path: Path, appendfsync: str, crash: Crash
) -> None:
    row = await measure(tmp_path, appendfsync, crash)
    print("durability " + " ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    if appendfsync == "always":
        assert row["lost_total"] == 0, row

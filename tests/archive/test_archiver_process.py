"""The archive end to end, every part a real process: admission, sender and poller with the
archive on, the sandbox provider, Redis, PostgreSQL and the archiver, which is SIGKILLed while
it works and started again. Every settled operation reaches PostgreSQL once, its hash and
ledger as Redis held them (docs/archive.md)."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import asyncpg
from redis.asyncio import Redis

from services.ctl.embedded import RedisServer
from shared import archive as evidence
from shared.keys import PartitionKeys
from shared.model import TERMINAL
from tests.archive.helpers import comparable, until
from tests.e2e.conftest import BASELINE, E2E, POLLER_ENV, SENDER_ENV, service_env
from tests.support.processes import Processes, ServiceProcess
from tests.support.sandbox import run_sandbox_process

OPERATIONS = 40
ARCHIVER_ENV = {
    "RESETGATE_ARCHIVE_BATCH": "5",
    "RESETGATE_ARCHIVE_POLL_SECONDS": "0.05",
    "RESETGATE_ARCHIVE_CLAIM_IDLE_SECONDS": "1",
}


async def settled(redis: Redis, ops: list[str]) -> bool:
    for op in ops:
        state = await redis.hget(PartitionKeys.of(op).operation(op), "state")
        if state not in {str(s) for s in TERMINAL}:
            return False
    return True


async def streams_empty(redis: Redis) -> bool:
    lengths = [await redis.xlen(PartitionKeys(p).settled) for p in range(4)]
    return sum(lengths) == 0


async def archived(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval("SELECT count(*) FROM operations"))
    finally:
        await conn.close()


async def test_an_archiver_killed_mid_batch_loses_nothing_and_writes_nothing_twice(
    redis: Redis, redis_server: RedisServer, archive_dsn: str
) -> None:
    logs = Path(tempfile.mkdtemp(prefix="rg-archive-"))
    async with run_sandbox_process(**BASELINE) as provider_url:
        base = {
            **service_env(redis_server.url, provider_url),
            "RESETGATE_ARCHIVE_ENABLED": "true",
            "RESETGATE_ARCHIVE_DSN": archive_dsn,
        }
        async with Processes(logs, base) as processes:
            processes.add("admission")
            processes.add("sender", **SENDER_ENV)
            processes.add("poller", **POLLER_ENV)
            processes.add("archiver", **ARCHIVER_ENV)
            await asyncio.gather(*(processes.start(n) for n in processes.services))
            stack = E2E(processes, redis, provider_url)
            ops = []
            for i in range(OPERATIONS):
                await stack.account(f"acct-arch-{i}")
            half = OPERATIONS // 2
            ops += [await stack.admit(f"acct-arch-{i}") for i in range(half)]
            # Killed once it has written something, wherever it is in its batch; the second
            # half settles while it is dead, so the restarted one has work it never saw.
            await until(lambda: _some(archive_dsn), timeout=60)
            await processes["archiver"].kill()
            ops += [await stack.admit(f"acct-arch-{i}") for i in range(half, OPERATIONS)]
            assert await archived(archive_dsn) < OPERATIONS
            await processes["archiver"].start()
            await until(lambda: settled(redis, ops), timeout=120)
            # Every email's delivery event (the sandbox sends one for each) is in before the
            # stream is read as drained: one arriving later would reach Redis, not the archive.
            await until(lambda: _observed(redis, ops), timeout=120)
            await until(lambda: streams_empty(redis), timeout=120)
            await until(lambda: _all(archive_dsn), timeout=60)
            assert configured_archive(processes["admission"]) == "postgresql"
    assert await archived(archive_dsn) == OPERATIONS  # each once
    pool_settings = evidence.ArchiveSettings(archive_dsn=archive_dsn)  # type: ignore[arg-type]
    async with evidence.open_pool(pool_settings) as pool:
        for op in ops:
            keys = PartitionKeys.of(op)
            raw = await redis.hgetall(keys.operation(op))
            found = await evidence.read_operation(pool, op)
            assert found is not None, op
            assert comparable(found.current_hash()) == comparable(raw), op
            assert found.ledger == await redis.lrange(keys.attempts(op), 0, -1), op
            assert await redis.pttl(keys.operation(op)) > 0  # archived: on its tail


async def _observed(redis: Redis, ops: list[str]) -> bool:
    for op in ops:
        delivery = await redis.hget(PartitionKeys.of(op).operation(op), "delivery")
        if delivery in (None, "", "unknown"):
            return False
    return True


async def _some(dsn: str) -> bool:
    return await archived(dsn) > 0


async def _all(dsn: str) -> bool:
    return await archived(dsn) >= OPERATIONS


def configured_archive(admission: ServiceProcess) -> str:
    """What admission's start-up line says of the archive."""
    records = [r for r in admission.log_records() if r.get("msg") == "admission configured"]
    return str(records[-1]["archive"])


async def test_without_a_dsn_admission_says_at_start_that_retention_is_redis_only(
    redis_server: RedisServer,
) -> None:
    logs = Path(tempfile.mkdtemp(prefix="rg-archive-"))
    env = service_env(redis_server.url, "http://127.0.0.1:9")  # never called: nothing admitted
    async with Processes(logs, env) as processes:
        admission = await processes.start("admission")
    assert configured_archive(admission) == "none: retention is Redis-only"

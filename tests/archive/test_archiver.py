"""The archiver against a real Redis and a real PostgreSQL: a settled operation reaches the
archive as Redis held it, Redis keeps it until then and lets it go only after, and nothing
is lost or written twice when the archiver dies or PostgreSQL stops (docs/archive.md)."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
from redis.asyncio import Redis

from services.archiver import rows
from services.ctl.localpg import LocalPostgres
from shared import clock
from shared.archive import read_operation
from shared.keys import PartitionKeys
from shared.scripts.observation import ApplyDelivery
from tests.archive.conftest import Settler
from tests.archive.helpers import archiver, drain, gone, until

# Fields the archiver itself adds once it has the operation (mark_archived.lua).
ADDED_AFTER = {"archived_at"}


async def count(archive: asyncpg.Connection, table: str) -> int:
    return int(await archive.fetchval(f'SELECT count(*) FROM "{table}"'))


async def test_a_settled_operation_is_archived_as_redis_held_it(
    settler: Settler, archive_dsn: str, archive: asyncpg.Connection
) -> None:
    ops = [
        await settler.settle(f"acct-{outcome}", outcome)
        for outcome in ("accepted", "failed", "expired")
    ]
    before = {op: await settler.held(op) for op in ops}
    async with archiver(settler, archive_dsn) as worker:
        await drain(worker, settler)
        for op in ops:
            archived = await read_operation(worker.pool, op)
            assert archived is not None
            raw, ledger = before[op]
            assert archived.hash == raw  # the hash, field for field, as Redis had it
            assert archived.ledger == ledger  # every ledger row, byte for byte
            now_raw, _ = await settler.held(op)
            assert set(now_raw) - set(raw) == ADDED_AFTER
    assert await count(archive, "operations") == 3
    assert await count(archive, "attempts") == 2  # the expired one never began an attempt


async def test_nothing_secret_is_archived(
    settler: Settler, archive_dsn: str, archive: asyncpg.Connection
) -> None:
    op = await settler.settle("acct-secret")
    async with archiver(settler, archive_dsn) as worker:
        await drain(worker, settler)
    dump = ""
    for table in rows.COLUMNS:
        dump += " ".join(str(tuple(row)) for row in await archive.fetch(f'SELECT * FROM "{table}"'))
    assert op in dump
    for secret in ("@", "token=", "http://", "https://"):
        assert secret not in dump


async def test_an_operation_not_archived_never_expires(settler: Settler, archive_dsn: str) -> None:
    op = await settler.settle("acct-wait")
    keys = PartitionKeys.of(op)
    assert await settler.redis.pttl(keys.operation(op)) == -1
    assert await settler.redis.pttl(keys.attempts(op)) == -1
    assert await settler.waiting() == 1
    async with archiver(settler, archive_dsn, archive_tail_seconds=120) as worker:
        await drain(worker, settler)
    # Archived: expires after the tail (past the observation window's end it is still
    # within), not before.
    ttl = await settler.redis.pttl(keys.operation(op))
    assert 110_000 < ttl <= 180_000
    assert await settler.redis.pttl(keys.attempts(op)) > 110_000


async def test_with_the_archive_off_an_operation_expires_after_retention_and_waits_for_nobody(
    redis: Redis, redis_server: Any
) -> None:
    settler = Settler(redis, redis_server.url, archive_enabled=False)
    op = await settler.settle("acct-off")
    keys = PartitionKeys.of(op)
    assert 0 < await redis.pttl(keys.operation(op)) <= settler.settings.retention_ms
    assert await settler.waiting() == 0  # no stream nobody reads


async def test_an_archived_operation_expires_from_redis_after_the_tail(
    settler: Settler, archive_dsn: str
) -> None:
    op = await settler.settle("acct-tail", "failed")
    keys = PartitionKeys.of(op)
    async with archiver(settler, archive_dsn, archive_tail_seconds=1) as worker:
        await drain(worker, settler)
        await until(lambda: gone(settler.redis, keys.operation(op), keys.attempts(op)))
        archived = await read_operation(worker.pool, op)
    assert archived is not None and archived.hash["state"] == "failed"
    # Its account's record went with it (this was its last operation): nothing of it stays.
    assert not await settler.redis.exists(keys.account("acct-tail"))


async def test_an_account_with_a_newer_operation_keeps_its_record(
    settler: Settler, archive_dsn: str
) -> None:
    old = await settler.settle("acct-newer", "failed")
    newer = await settler.admit("acct-newer")  # live: the account's record points at it
    keys = PartitionKeys.of(old)
    async with archiver(settler, archive_dsn, archive_tail_seconds=1) as worker:
        await drain(worker, settler)
        await until(lambda: gone(settler.redis, keys.operation(old)))
    assert await settler.redis.hget(keys.account("acct-newer"), "last") == newer
    assert await settler.redis.pttl(keys.account("acct-newer")) > 60_000


async def test_an_archiver_dead_after_its_commit_loses_nothing_and_writes_nothing_twice(
    settler: Settler, archive_dsn: str, archive: asyncpg.Connection
) -> None:
    ops = [await settler.settle(f"acct-crash-{i}") for i in range(12)]
    async with archiver(settler, archive_dsn, consumer_name="dies") as first:
        batch = await first._read()
        assert len(batch) == 12
        # It commits its batch, then dies before it marks and acknowledges.
        found = await first._read_operations(batch.operations)
        written = rows.Batch()
        for op, (raw, ledger) in found.items():
            written.add(op, raw, ledger)
        await first.prune_step()
        async with first.pool.acquire() as conn:
            await rows.write(conn, written)
    assert await count(archive, "operations") == 12
    assert await settler.waiting() == 12  # nothing acknowledged
    async with archiver(settler, archive_dsn, consumer_name="survives") as second:
        async with asyncio.timeout(20):
            while await settler.waiting():
                await second.claim_step()
                await asyncio.sleep(0.2)
    assert await count(archive, "operations") == 12
    assert await count(archive, "attempts") == 12
    for op in ops:
        assert await settler.redis.pttl(PartitionKeys.of(op).operation(op)) > 0


async def test_postgres_stopped_keeps_the_batch_until_it_is_back(
    settler: Settler, archive_dsn: str, archive: asyncpg.Connection, postgres: LocalPostgres
) -> None:
    await archive.close()
    ops = [await settler.settle(f"acct-down-{i}") for i in range(5)]
    async with archiver(settler, archive_dsn, archive_timeout_seconds=2) as worker:
        postgres.stop()
        try:
            wait = await worker.archive_step()
            assert wait > 0 and len(worker.held) == 5
            assert await settler.waiting() == 5
            for op in ops:  # not archived: still no expiry
                assert await settler.redis.pttl(PartitionKeys.of(op).operation(op)) == -1
        finally:
            postgres.start()
        await drain(worker, settler)
    conn = await asyncpg.connect(archive_dsn)
    try:
        assert await count(conn, "operations") == 5
    finally:
        await conn.close()


async def test_a_delivery_event_after_the_archive_is_archived_as_a_row(
    settler: Settler, archive_dsn: str, archive: asyncpg.Connection
) -> None:
    op = await settler.settle("acct-late")
    async with archiver(settler, archive_dsn) as worker:
        await drain(worker, settler)
        assert await count(archive, "delivery_events") == 0
        await ApplyDelivery(
            message_id=f"msg-{op}",
            event_type="delivered",
            occurred_at=clock.now_ms(),
            now=clock.now_ms(),
            operation_id=op,
            mode="",
        ).run(settler.redis)
        assert await settler.waiting() == 1
        await drain(worker, settler)
        archived = await read_operation(worker.pool, op)
    assert archived is not None
    assert [e["delivery"] for e in archived.delivery_events] == ["delivered"]
    assert archived.hash.get("delivery") is None  # the snapshot at settlement is kept
    assert archived.current_hash()["delivery"] == "delivered"
    assert await count(archive, "operations") == 1


async def test_a_delivery_between_read_and_mark_puts_the_operation_back_unexpired(
    settler: Settler, archive_dsn: str, archive: asyncpg.Connection
) -> None:
    op = await settler.settle("acct-race")
    async with archiver(settler, archive_dsn) as worker:
        batch = await worker._read()
        found = await worker._read_operations(batch.operations)
        await ApplyDelivery(
            message_id=f"msg-{op}",
            event_type="bounced",
            occurred_at=clock.now_ms(),
            now=clock.now_ms(),
            operation_id=op,
            mode="",
        ).run(settler.redis)
        await worker._mark(found)
        assert await settler.redis.pttl(PartitionKeys.of(op).operation(op)) == -1
        for p, ids in batch.entries.items():
            await worker.consumers[p].ack_and_delete(*ids)
        assert await settler.waiting() == 1  # queued again by the mark
        await drain(worker, settler)
        archived = await read_operation(worker.pool, op)
    assert archived is not None and archived.current_hash()["delivery"] == "bounced"
    assert await settler.redis.pttl(PartitionKeys.of(op).operation(op)) > 0

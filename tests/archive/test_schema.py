"""The archive's schema: migrations applied once each (by `resetgate archive migrate` too),
every table partitioned by month with the settled time in every primary key, and retention
that drops whole months past ARCHIVE_RETENTION_DAYS, never a row of a month inside it."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime

import asyncpg

from services.archiver import rows
from shared import archive_schema as schema
from shared.clock import from_datetime

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


async def test_migrations_apply_once_each(archive: asyncpg.Connection) -> None:
    assert await schema.migrate(archive) == []  # the fixture applied them all
    versions = [r["version"] for r in await archive.fetch("SELECT version FROM archive_migrations")]
    assert versions == [m.version for m in schema.migrations()]


async def test_every_primary_key_includes_the_settled_time(archive: asyncpg.Connection) -> None:
    for table in schema.TABLES:
        columns = await archive.fetch(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid"
            " AND a.attnum = ANY(i.indkey) WHERE i.indrelid = $1::regclass AND i.indisprimary",
            table,
        )
        assert "settled_at" in {c["attname"] for c in columns}, table
        kind = await archive.fetchval(
            "SELECT partstrat::text FROM pg_partitioned_table WHERE partrelid = $1::regclass", table
        )
        assert kind == "r", table  # partitioned by range (of settled_at)


def _operation(at: datetime, operation_id: str) -> rows.Batch:
    batch = rows.Batch()
    raw = {"account_id": "acct-r", "state": "failed", "settled_at": str(from_datetime(at))}
    batch.add(operation_id, raw, ['["at-1",1]'])
    return batch


async def test_retention_drops_whole_months_past_it_and_keeps_the_rest(
    archive: asyncpg.Connection,
) -> None:
    old, kept, current = (
        datetime(2026, 9, 15, tzinfo=UTC),
        datetime(2026, 11, 20, tzinfo=UTC),
        NOW,
    )
    ids = {
        "op-0-01JA0000000000000000000000": old,
        "op-0-01JD0000000000000000000000": kept,
        "op-0-01JE0000000000000000000000": current,
    }
    for operation_id, at in ids.items():
        await schema.ensure_month(archive, schema.month_of(at))
        await rows.write(archive, _operation(at, operation_id))
    # 30 days before NOW is 2 November: September ended before it, November has not.
    dropped = await schema.drop_expired(archive, 30, NOW)
    assert sorted(dropped) == sorted(f"{t}_2026_09" for t in schema.TABLES)
    left = {r["operation_id"] for r in await archive.fetch("SELECT operation_id FROM operations")}
    assert left == {"op-0-01JD0000000000000000000000", "op-0-01JE0000000000000000000000"}
    assert await archive.fetchval("SELECT count(*) FROM attempts") == 2
    # A month that ended inside the retention is never dropped, however little of it is left.
    assert await schema.drop_expired(archive, 31, NOW) == []
    # One day's retention on 2 December: November (ended 1 December) goes, December stays.
    november = await schema.drop_expired(archive, 1, NOW)
    assert sorted(november) == sorted(f"{t}_2026_11" for t in schema.TABLES)


async def test_the_cli_migrates_a_new_database(postgres: object, archive_dsn: str) -> None:
    admin = await asyncpg.connect(archive_dsn)
    await admin.execute("CREATE DATABASE fresh_cli")
    await admin.close()
    dsn = archive_dsn.rsplit("/", 1)[0] + "/fresh_cli"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESETGATE_")}

    def migrate() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "services.ctl.main", "archive", "migrate"],
            env={**env, "RESETGATE_ARCHIVE_DSN": dsn, "RESETGATE_RUN_DIR": "/nonexistent"},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    first = migrate()
    assert first.returncode == 0, first.stderr
    assert "0001_archive.sql" in first.stdout
    again = migrate()
    assert again.returncode == 0 and "up to date" in again.stderr
    conn = await asyncpg.connect(dsn)
    try:
        assert len(await schema.partitions(conn)) == 2 * len(schema.TABLES)
    finally:
        await conn.close()
    admin = await asyncpg.connect(archive_dsn)
    await admin.execute("DROP DATABASE fresh_cli WITH (FORCE)")
    await admin.close()

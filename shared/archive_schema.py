"""The archive's schema: versioned migrations (``archive_migrations/NNNN_name.sql``, applied
in order, each once, in a transaction, under an advisory lock so two migrators never race)
and its monthly partitions: created ahead of the rows that need them, dropped whole past
retention (never a DELETE)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib import resources

import asyncpg

# The tables partitioned by month on settled_at (every one the migrations create).
TABLES = ("operations", "attempts", "delivery_events", "operator_actions", "support_cases")
_LOCK = 0x72657365  # pg_advisory_xact_lock key: "rese"
_MIGRATION = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
_PARTITION = re.compile(r"^(?P<table>[a-z_]+)_(?P<year>\d{4})_(?P<month>\d{2})$")


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


def migrations() -> list[Migration]:
    """Every migration shipped with this release, oldest first."""
    folder = resources.files("shared") / "archive_migrations"
    found = []
    for item in folder.iterdir():
        if match := _MIGRATION.match(item.name):
            found.append(Migration(int(match[1]), item.name, item.read_text()))
    return sorted(found, key=lambda m: m.version)


async def migrate(conn: asyncpg.Connection) -> list[str]:
    """Apply the migrations this database has not had; returns their names."""
    applied: list[str] = []
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK)
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS archive_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {r["version"] for r in await conn.fetch("SELECT version FROM archive_migrations")}
        for migration in migrations():
            if migration.version in done:
                continue
            await conn.execute(migration.sql)
            await conn.execute(
                "INSERT INTO archive_migrations (version, name) VALUES ($1, $2)",
                migration.version,
                migration.name,
            )
            applied.append(migration.name)
    return applied


def month_of(at: datetime) -> datetime:
    return at.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def next_month(month: datetime) -> datetime:
    return (month + timedelta(days=32)).replace(day=1)


def partition_name(table: str, month: datetime) -> str:
    return f"{table}_{month:%Y_%m}"


async def ensure_month(conn: asyncpg.Connection, month: datetime) -> None:
    """Every table's partition for ``month`` (the first instant of a month, UTC)."""
    upper = next_month(month)
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK)
        for table in TABLES:
            await conn.execute(
                f'CREATE TABLE IF NOT EXISTS "{partition_name(table, month)}" PARTITION OF '
                f"\"{table}\" FOR VALUES FROM ('{month.isoformat()}') TO ('{upper.isoformat()}')"
            )


async def partitions(conn: asyncpg.Connection) -> list[tuple[str, datetime]]:
    """(partition, its month) of every archive table, oldest first."""
    rows = await conn.fetch(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
        " JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = ANY($1::text[])",
        list(TABLES),
    )
    found = []
    for row in rows:
        if match := _PARTITION.match(row["relname"]):
            month = datetime(int(match["year"]), int(match["month"]), 1, tzinfo=UTC)
            found.append((row["relname"], month))
    return sorted(found, key=lambda item: (item[1], item[0]))


async def drop_expired(conn: asyncpg.Connection, retention_days: int, now: datetime) -> list[str]:
    """Drop every partition whose whole month ended more than ``retention_days`` before
    ``now``: a row is kept at least that long, at most a month longer. Never a DELETE."""
    cutoff = now - timedelta(days=retention_days)
    dropped = []
    for name, month in await partitions(conn):
        if next_month(month) <= cutoff:
            await conn.execute(f'DROP TABLE IF EXISTS "{name}"')
            dropped.append(name)
    return dropped

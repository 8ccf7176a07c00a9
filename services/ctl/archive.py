"""``resetgate archive``: the PostgreSQL evidence archive's schema (docs/archive.md).

``migrate`` applies the migrations the database lacks (each once, in order, under a lock, so
the chart's hook Job and a person never race) and creates this month's and next month's
partitions. It reads ``RESETGATE_ARCHIVE_DSN`` (else the running `resetgate up` stack's).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import UTC, datetime

import asyncpg

from services.ctl.stack import StackError, find_env_file, read_env
from shared import archive_schema as schema
from shared.archive import ARCHIVE_ERRORS
from shared.settings import ArchiveSettings, load

VARIABLE = "RESETGATE_ARCHIVE_DSN"


def archive_settings() -> ArchiveSettings:
    settings = load(ArchiveSettings)
    if not settings.archive_configured and (path := find_env_file()) is not None:
        dsn = read_env(path).get(VARIABLE, "")
        settings = settings.model_copy(update={"archive_dsn": type(settings.archive_dsn)(dsn)})
    if not settings.archive_configured:
        raise StackError(f"no archive: set {VARIABLE} (postgresql://user:pass@host:5432/db)")
    return settings


async def apply(settings: ArchiveSettings) -> list[str]:
    conn = await asyncpg.connect(
        settings.archive_dsn.get_secret_value(), timeout=settings.archive_timeout_seconds
    )
    try:
        applied = await schema.migrate(conn)
        month = schema.month_of(datetime.now(UTC))
        for m in (month, schema.next_month(month)):
            await schema.ensure_month(conn, m)
        return applied
    finally:
        await conn.close()


def migrate(_: argparse.Namespace) -> int:
    settings = archive_settings()
    try:
        applied = asyncio.run(apply(settings))
    except ARCHIVE_ERRORS as error:
        raise StackError(f"the archive did not take the migration: {error}") from None
    if applied:
        print("applied: " + ", ".join(applied))
    else:
        print("the archive's schema is up to date", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    archive = sub.add_parser("archive", help="the PostgreSQL evidence archive")
    commands = archive.add_subparsers(dest="archive_command", required=True, metavar="COMMAND")
    run = commands.add_parser("migrate", help="apply the archive's schema migrations")
    run.set_defaults(handler=migrate)

"""The PostgreSQL evidence archive, read side: what support sees of an operation once Redis
has let it go (docs/archive.md). Written by services/archiver only.

Every call has the pool's timeout; an archive that does not answer is an error the caller
reports (``ArchiveUnavailable``), never an empty history that would read as "nothing sent".
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from shared import codec
from shared.clock import from_datetime, to_datetime
from shared.model import Operation
from shared.operation_views import (
    OperationDetail,
    account_operation_id,
    decode_ledger,
    find_operation,
    operation_partition,
)
from shared.redis import RedisClient
from shared.settings import ArchiveSettings

# What a read of the archive may raise besides a query error: the server gone or too slow
# (InternalClientError: a pooled connection the server dropped in the middle of a query).
ARCHIVE_ERRORS = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    OSError,
    TimeoutError,
)


class ArchiveUnavailable(Exception):
    """The archive did not answer (down, unreachable, too slow)."""


@asynccontextmanager
async def open_pool(settings: ArchiveSettings) -> AsyncIterator[asyncpg.Pool]:
    """A pool on the archive; every query on it times out after the setting."""
    pool = await asyncpg.create_pool(
        settings.archive_dsn.get_secret_value(),
        min_size=0,
        max_size=settings.archive_pool_size,
        timeout=settings.archive_timeout_seconds,
        command_timeout=settings.archive_timeout_seconds,
    )
    try:
        yield pool
    finally:
        await pool.close()


@dataclass(slots=True)
class Archived:
    """One settled operation as the archive holds it: its hash and ledger rows as Redis had
    them at settlement, and what was archived about it since."""

    operation_id: str
    settled_at: int
    hash: dict[str, str]
    ledger: list[str] = field(default_factory=list)
    delivery_events: list[dict[str, Any]] = field(default_factory=list)
    support_cases: list[dict[str, str]] = field(default_factory=list)
    operator_actions: list[dict[str, str]] = field(default_factory=list)

    def current_hash(self) -> dict[str, str]:
        """The hash with the latest archived delivery event applied (events that arrived
        after settlement are rows of their own; the snapshot is never rewritten)."""
        current = dict(self.hash)
        if self.delivery_events:
            last = self.delivery_events[-1]
            current["delivery"] = last["delivery"]
            current["delivery_event_at"] = str(last["event_at"])
            current["delivery_observed_at"] = str(last["observed_at"])
        return current


_OPERATION = (
    "SELECT settled_at, hash FROM operations WHERE operation_id = $1"
    " ORDER BY settled_at DESC LIMIT 1"
)
_RELATED = {
    "attempts": "SELECT row FROM attempts WHERE operation_id = $1 AND settled_at = $2"
    " ORDER BY position",
    "delivery_events": "SELECT delivery, event_at, observed_at FROM delivery_events"
    " WHERE operation_id = $1 AND settled_at = $2 ORDER BY observed_at, event_at",
    "support_cases": "SELECT fields FROM support_cases WHERE operation_id = $1"
    " AND settled_at = $2 ORDER BY entry_id",
    "operator_actions": "SELECT fields FROM operator_actions WHERE operation_id = $1"
    " AND settled_at = $2 ORDER BY entry_id",
}


async def read_operation(pool: asyncpg.Pool, operation_id: str) -> Archived | None:
    """The latest settlement of ``operation_id`` in the archive, or None."""
    try:
        async with pool.acquire() as conn:
            head = await conn.fetchrow(_OPERATION, operation_id)
            if head is None:
                return None
            at = head["settled_at"]
            rows = {name: await conn.fetch(sql, operation_id, at) for name, sql in _RELATED.items()}
    except ARCHIVE_ERRORS as error:
        raise ArchiveUnavailable(type(error).__name__) from error
    return Archived(
        operation_id=operation_id,
        settled_at=from_datetime(at),
        hash=codec.loads(head["hash"]),
        ledger=[r["row"] for r in rows["attempts"]],
        delivery_events=[dict(r) for r in rows["delivery_events"]],
        support_cases=[codec.loads(r["fields"]) for r in rows["support_cases"]],
        operator_actions=[codec.loads(r["fields"]) for r in rows["operator_actions"]],
    )


_HISTORY = (
    "SELECT DISTINCT ON (operation_id) operation_id, hash FROM operations"
    " WHERE account_id = $1 AND created_at >= $2"
    " ORDER BY operation_id DESC, settled_at DESC LIMIT $3"
)


async def account_history(
    pool: asyncpg.Pool, account_id: str, since_ms: int, limit: int
) -> list[tuple[str, dict[str, str]]]:
    """(operation id, hash) of the account's archived operations created at or after
    ``since_ms``, newest first (ids sort by creation: ``op-<p>-<ulid>``)."""
    try:
        rows = await pool.fetch(_HISTORY, account_id, to_datetime(since_ms), limit)
    except ARCHIVE_ERRORS as error:
        raise ArchiveUnavailable(type(error).__name__) from error
    return [(r["operation_id"], codec.loads(r["hash"])) for r in rows]


@asynccontextmanager
async def maybe_pool(settings: ArchiveSettings) -> AsyncIterator[asyncpg.Pool | None]:
    """The archive's pool where one is configured, else None (Redis only)."""
    if not settings.archive_configured:
        yield None
        return
    async with open_pool(settings) as pool:
        yield pool


HISTORY = 100  # operations an account's history lists unless asked for fewer
MAX_HISTORY = 1000

# Where a view was read from: each view says so ("source"), as does a history ("archive").
REDIS = "redis"
ARCHIVE = "archive"
NOT_CONFIGURED = "not_configured"
UNAVAILABLE = "unavailable"


class Evidence:
    """An operation, or an account's history, read where it lives: Redis first, the archive
    for what Redis no longer holds (``pool`` None: no archive)."""

    def __init__(self, client: RedisClient, pool: asyncpg.Pool | None, partitions: int) -> None:
        self.client = client
        self.pool = pool
        self.partitions = partitions

    async def operation(self, operation_id: str) -> tuple[OperationDetail, str] | None:
        """(the operation, where it was read); None where neither holds it. Raises
        ArchiveUnavailable when Redis lacks it and the archive does not answer."""
        detail = await find_operation(self.client, operation_id, self.partitions)
        if detail is not None:
            return detail, REDIS
        if self.pool is None or operation_partition(operation_id, self.partitions) is None:
            return None
        archived = await read_operation(self.pool, operation_id)
        if archived is None:
            return None
        return archived_detail(archived), ARCHIVE

    async def history(
        self, account_id: str, since_ms: int, limit: int
    ) -> tuple[list[tuple[OperationDetail, str]], str]:
        """The account's operations created at or after ``since_ms``, newest first, each
        with where it was read, and what became of the archive's part (read, not
        configured, unavailable). Redis holds the account's last operation; the archive
        every settled one."""
        found: dict[str, tuple[OperationDetail, str]] = {}
        last = await account_operation_id(self.client, account_id, self.partitions)
        if last is not None:
            detail = await find_operation(self.client, last, self.partitions)
            if detail is not None and detail.operation.created_at >= since_ms:
                found[last] = (detail, REDIS)
        archive = NOT_CONFIGURED
        if self.pool is not None:
            try:
                rows = await account_history(self.pool, account_id, since_ms, limit)
                archive = ARCHIVE
            except ArchiveUnavailable:
                rows, archive = [], UNAVAILABLE
            for operation_id, raw in rows:  # a history row: the operation, not its ledger
                if operation_id not in found:
                    found[operation_id] = (
                        OperationDetail(Operation.from_hash(operation_id, raw), []),
                        ARCHIVE,
                    )
        # Newest first: by creation, then id (two created in one millisecond).
        ordered = sorted(found.items(), key=lambda item: (item[1][0].operation.created_at, item[0]))
        return [view for _, view in reversed(ordered)][:limit], archive


def archived_detail(archived: Archived) -> OperationDetail:
    operation = Operation.from_hash(archived.operation_id, archived.current_hash())
    return OperationDetail(operation, decode_ledger(archived.operation_id, archived.ledger))

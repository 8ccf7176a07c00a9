"""A real PostgreSQL for the archive's tests: one server per test worker (initdb into a
temporary directory, services/ctl/localpg.py), a fresh migrated database per test."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from typing import Any

import asyncpg
import pytest
from redis.asyncio import Redis

from services.archiver.settings import ArchiverSettings
from services.ctl.embedded import RedisServer, free_port
from services.ctl.localpg import LocalPostgres
from shared import archive_schema as schema
from shared import clock
from shared.admit import Admitter
from shared.keys import JOB_FIELD, PartitionKeys
from shared.scripts.attempts import BeginAttempt, BeginCode, Finalisation, FinaliseAttempt
from shared.tokens import parse_keys
from tests.conftest import TEST_TOKEN_KEYS, make_settings


@pytest.fixture(scope="session")
def postgres() -> Iterator[LocalPostgres]:
    server = LocalPostgres(free_port()).start()
    yield server
    server.close()


@pytest.fixture
async def archive_dsn(postgres: LocalPostgres) -> AsyncIterator[str]:
    """The DSN of a new database holding the archive's schema (every migration applied)."""
    name = f"t_{secrets.token_hex(6)}"
    admin = await asyncpg.connect(postgres.dsn)
    await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.close()
    dsn = postgres.dsn.rsplit("/", 1)[0] + "/" + name
    conn = await asyncpg.connect(dsn)
    try:
        await schema.migrate(conn)
    finally:
        await conn.close()
    yield dsn
    admin = await asyncpg.connect(postgres.dsn)  # a test may have restarted the server
    await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
    await admin.close()


@pytest.fixture
async def archive(archive_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(archive_dsn)
    yield conn
    await conn.close()


def archiver_settings(redis_url: str, dsn: str, **overrides: Any) -> ArchiverSettings:
    values: dict[str, Any] = {
        "redis_url": redis_url,
        "archive_dsn": dsn,
        "partitions": 4,
        "archive_batch": 50,
        "archive_tail_seconds": 3600,
        "archive_claim_idle_seconds": 1,
        "consumer_name": "archiver-a",
        "archive_timeout_seconds": 5,
    }
    values.update(overrides)
    return ArchiverSettings(**values)


class Settler:
    """Operations taken to an end state by the scripts the services run (admit, begin,
    finalise), with the archive on (or off: ``archive_enabled=False``)."""

    def __init__(self, redis: Redis, redis_url: str, archive_enabled: bool = True) -> None:
        self.redis = redis
        # No cooldown: an account's next request after a settled one is a new operation.
        self.settings = make_settings(
            redis_url, archive_enabled=archive_enabled, cooldown_seconds=0
        )

    async def admit(self, account_id: str) -> str:
        admitter = Admitter(self.redis, self.settings, parse_keys(TEST_TOKEN_KEYS))
        return (await admitter.admit(account_id, "agent")).operation_id

    async def settle(self, account_id: str, outcome: str = "accepted") -> str:
        """A new operation for ``account_id``, attempted once and ended as ``outcome``:
        accepted (with a provider message id), failed (a permanent refusal), or expired
        (its begin comes after the token expired)."""
        operation_id = await self.admit(account_id)
        entry_id = await self.send_entry(operation_id)
        now = clock.now_ms()
        if outcome == "expired":
            now += self.settings.token_ttl_ms + 1
        begun = await BeginAttempt(
            operation_id=operation_id,
            attempt_id=f"at-{operation_id}",
            now=now,
            lease_ms=60_000,
            max_attempts=6,
            consumer="test",
            entry_id=entry_id,
            retention_ms=self.settings.settled_retention_ms,
        ).run(self.redis)
        if outcome == "expired":
            assert begun.code is BeginCode.EXPIRED
            return operation_id
        result = (
            Finalisation(
                outcome="accepted",
                http_status=202,
                next_state="accepted",
                message_id=f"msg-{operation_id}",
                observe_until=now + 60_000,
            )
            if outcome == "accepted"
            else Finalisation(
                outcome="permanent",
                http_status=422,
                next_state="failed",
                reason="recipient_refused",
            )
        )
        await FinaliseAttempt(
            operation_id=operation_id,
            attempt_id=f"at-{operation_id}",
            now=now,
            entry_id=entry_id,
            result=result,
            retention_ms=self.settings.settled_retention_ms,
        ).run(self.redis)
        return operation_id

    async def send_entry(self, operation_id: str) -> str:
        """The send stream entry admission added for ``operation_id`` (the newest): the
        scripts acknowledge and delete it as the sender's do."""
        send = PartitionKeys.of(operation_id).send
        entries = await self.redis.xrevrange(send, count=1)
        assert entries and entries[0][1].get(JOB_FIELD) == operation_id, entries
        return str(entries[0][0])

    async def held(self, operation_id: str) -> tuple[dict[str, str], list[str]]:
        """The operation's hash and ledger rows as Redis holds them now."""
        keys = PartitionKeys.of(operation_id)
        raw = await self.redis.hgetall(keys.operation(operation_id))
        return raw, await self.redis.lrange(keys.attempts(operation_id), 0, -1)

    async def waiting(self) -> int:
        """Entries on the settled streams (acknowledged ones are deleted)."""
        total = 0
        for p in range(self.settings.partitions):
            total += await self.redis.xlen(PartitionKeys(p).settled)
        return total


@pytest.fixture
def settler(redis: Redis, redis_server: RedisServer) -> Settler:
    return Settler(redis, redis_server.url)

"""One batch of settled operations as archive rows: read from Redis, written to PostgreSQL
in one transaction (a multi-row INSERT per table, ON CONFLICT DO NOTHING: writing a batch
twice, after a crash between commit and acknowledgement, changes nothing)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from shared import codec
from shared.clock import to_datetime
from shared.ids import operation_created_ms
from shared.model import Delivery


@dataclass(slots=True)
class Batch:
    """The rows of one batch, table by table, each row in the table's column order."""

    operations: list[tuple[Any, ...]] = field(default_factory=list)
    attempts: list[tuple[Any, ...]] = field(default_factory=list)
    delivery_events: list[tuple[Any, ...]] = field(default_factory=list)
    operator_actions: list[tuple[Any, ...]] = field(default_factory=list)
    support_cases: list[tuple[Any, ...]] = field(default_factory=list)

    def months(self) -> set[datetime]:
        return {row[0] for row in self.operations}

    def add(self, operation_id: str, raw: dict[str, str], ledger: list[str]) -> None:
        """One settled operation: its hash and ledger exactly as Redis held them."""
        at = to_datetime(int(raw["settled_at"]))
        self.operations.append(
            (
                at,
                operation_id,
                raw["account_id"],
                to_datetime(operation_created_ms(operation_id)),
                raw["state"],
                raw.get("provider", ""),
                raw.get("provider_message_id", ""),
                raw.get("reason", ""),
                codec.dumps_str(raw),
            )
        )
        self.attempts += [(at, operation_id, i, row) for i, row in enumerate(ledger, 1)]
        delivery = raw.get("delivery") or Delivery.UNKNOWN
        if delivery != Delivery.UNKNOWN:
            self.delivery_events.append(
                (
                    at,
                    operation_id,
                    delivery,
                    int(raw.get("delivery_event_at") or 0),
                    int(raw.get("delivery_observed_at") or 0),
                )
            )

    def add_related(
        self, table: str, at: datetime, operation_id: str, entry_id: str, fields: dict[str, str]
    ) -> None:
        rows: list[tuple[Any, ...]] = getattr(self, table)
        rows.append((at, operation_id, entry_id, codec.dumps_str(fields)))


# table -> (its columns, their PostgreSQL types), in the order Batch writes them. Several
# columns a line, as the table reads: the formatter would give each pair a line of its own.
COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "operations": (
        ("settled_at", "timestamptz"), ("operation_id", "text"), ("account_id", "text"),
        ("created_at", "timestamptz"), ("state", "text"), ("provider", "text"),
        ("provider_message_id", "text"), ("reason", "text"), ("hash", "jsonb"),
    ),
    "attempts": (
        ("settled_at", "timestamptz"), ("operation_id", "text"), ("position", "integer"),
        ("row", "text"),
    ),
    "delivery_events": (
        ("settled_at", "timestamptz"), ("operation_id", "text"), ("delivery", "text"),
        ("event_at", "bigint"), ("observed_at", "bigint"),
    ),
    "operator_actions": (
        ("settled_at", "timestamptz"), ("operation_id", "text"), ("entry_id", "text"),
        ("fields", "jsonb"),
    ),
    "support_cases": (
        ("settled_at", "timestamptz"), ("operation_id", "text"), ("entry_id", "text"),
        ("fields", "jsonb"),
    ),
}  # fmt: skip


def insert_sql(table: str) -> str:
    """One multi-row INSERT of a whole column set: each column one array parameter."""
    columns = COLUMNS[table]
    names = ", ".join(f'"{name}"' for name, _ in columns)
    arrays = ", ".join(f"${i}::{kind}[]" for i, (_, kind) in enumerate(columns, 1))
    # Names from COLUMNS only, never from data: the values are parameters.
    return (
        f'INSERT INTO "{table}" ({names}) SELECT * FROM unnest({arrays})'  # noqa: S608
        " ON CONFLICT DO NOTHING"
    )


async def write(conn: asyncpg.Connection, batch: Batch) -> None:
    """Every row of ``batch`` in one transaction (the caller acknowledges after it)."""
    async with conn.transaction():
        for table in COLUMNS:
            rows: list[tuple[Any, ...]] = getattr(batch, table)
            if rows:
                await conn.execute(
                    insert_sql(table), *(list(col) for col in zip(*rows, strict=True))
                )

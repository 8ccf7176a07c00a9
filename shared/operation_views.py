"""Read-only views of the operation store, shared by the internal API and ``resetgate ops``.

Nothing here writes. Each view is one operation (with its attempt ledger) or one row per
operation: on-call reads concrete operations, never an average. How many are where (queue
lengths per partition, a provider's pacing) is ``shared.status``; the operator's switches are
``shared.control``.
"""

from __future__ import annotations

import dataclasses
import heapq
import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from shared.clock import to_seconds
from shared.keys import SUPPORT_CASES, PartitionKeys, partition_of, partition_of_operation
from shared.logging import event
from shared.model import Attempt, Operation, State
from shared.redis import RedisClient

log = logging.getLogger(__name__)

MAX_OLDEST = 1000


def remaining_attempts(operation: Operation, max_attempts: int) -> int:
    return max(0, max_attempts - operation.attempts)


@dataclass(frozen=True, slots=True)
class OperationDetail:
    operation: Operation
    ledger: list[Attempt]

    def view(self, max_attempts: int) -> dict[str, Any]:
        """``Operation.public_view`` plus the remaining budget and the attempt ledger."""
        view = self.operation.public_view()
        view["remaining_attempts"] = remaining_attempts(self.operation, max_attempts)
        view["attempt_ledger"] = [dataclasses.asdict(a) for a in self.ledger]
        return view


def operation_partition(operation_id: str, partitions: int) -> int | None:
    """The id's partition, or None for a malformed id or a partition this store lacks."""
    try:
        partition = partition_of_operation(operation_id)
    except ValueError:
        return None
    return partition if partition < partitions else None


def decode_ledger(operation_id: str, rows: list[str]) -> list[Attempt]:
    ledger = []
    for number, row in enumerate(rows, 1):
        try:
            ledger.append(Attempt.decode(row, number))
        except (ValueError, KeyError, TypeError):
            # Show what can be shown; a bad row is a bug elsewhere, not a reason to 500.
            event(log, logging.WARNING, "unreadable attempt row", operation_id=operation_id)
    return ledger


def _operation(operation_id: str, raw: dict[str, str]) -> Operation | None:
    if not raw or "state" not in raw:
        return None
    try:
        return Operation.from_hash(operation_id, raw)
    except (ValueError, KeyError):
        return None


async def find_operation(
    client: RedisClient, operation_id: str, partitions: int
) -> OperationDetail | None:
    partition = operation_partition(operation_id, partitions)
    if partition is None:
        return None
    pk = PartitionKeys(partition)
    pipe = client.pipeline(transaction=False)
    pipe.hgetall(pk.operation(operation_id))
    pipe.lrange(pk.attempts(operation_id), 0, -1)
    raw, rows = await pipe.execute()
    operation = _operation(operation_id, raw)
    if operation is None:
        return None
    return OperationDetail(operation, decode_ledger(operation_id, rows))


async def account_operation_id(client: RedisClient, account_id: str, partitions: int) -> str | None:
    """The account's last operation (its live one, if it has one), else None."""
    pk = PartitionKeys(partition_of(account_id, partitions))
    last = await client.hget(pk.account(account_id), "last")
    return str(last) if last else None


def _row(operation: Operation, max_attempts: int, now_ms: int) -> dict[str, Any]:
    return {
        "operation_id": operation.operation_id,
        "account_id": operation.account_id,
        "partition": operation.partition,
        "state": str(operation.state),
        "created_at": operation.created_at,
        "age_seconds": round(to_seconds(max(0, now_ms - operation.created_at)), 3),
        "horizon_at": operation.horizon_at,
        "attempts": operation.attempts,
        "remaining_attempts": remaining_attempts(operation, max_attempts),
        "next_attempt_at": operation.next_attempt_at or None,
        "last_status": operation.last_status or None,
        "last_outcome": operation.last_outcome or None,
        "delivery": str(operation.delivery),
    }


async def oldest_live(
    client: RedisClient, partitions: int, limit: int, max_attempts: int, now_ms: int
) -> list[dict[str, Any]]:
    """The ``limit`` oldest live operations across every partition, oldest first."""
    limit = max(1, min(limit, MAX_OLDEST))
    pipe = client.pipeline(transaction=False)
    for partition in range(partitions):
        pipe.zrange(PartitionKeys(partition).live, 0, limit - 1, withscores=True)
    per_partition = await pipe.execute()
    candidates = [
        (score, operation_id, partition)
        for partition, members in enumerate(per_partition)
        for operation_id, score in members
    ]
    oldest = heapq.nsmallest(limit, candidates)
    if not oldest:
        return []
    pipe = client.pipeline(transaction=False)
    for _, operation_id, partition in oldest:
        pipe.hgetall(PartitionKeys(partition).operation(operation_id))
    rows = []
    for (_, operation_id, _), raw in zip(oldest, await pipe.execute(), strict=True):
        operation = _operation(operation_id, raw)
        if operation is not None:  # an index entry whose hash is gone is not an operation
            rows.append(_row(operation, max_attempts, now_ms))
    return rows


# Live but held for a person: not waiting to be sent, so not "eligible" on on-call's views.
HELD: frozenset[State] = frozenset({State.QUARANTINED, State.REVIEW})
_SCAN_EACH = 20  # a partition's oldest live entries looked at for its oldest eligible one


async def oldest_per_partition(
    client: RedisClient, partitions: int, max_attempts: int, now_ms: int
) -> list[dict[str, Any] | None]:
    """Each partition's oldest eligible operation (live and not held; None where it has none
    among its oldest few), in partition order."""
    pipe = client.pipeline(transaction=False)
    for partition in range(partitions):
        pipe.zrange(PartitionKeys(partition).live, 0, _SCAN_EACH - 1)
    heads = await pipe.execute()
    pipe = client.pipeline(transaction=False)
    for partition, members in enumerate(heads):
        for operation_id in members:
            pipe.hgetall(PartitionKeys(partition).operation(operation_id))
    hashes = iter(await pipe.execute())
    rows: list[dict[str, Any] | None] = []
    for members in heads:
        found = [_operation(op_id, next(hashes)) for op_id in members]
        first = next((op for op in found if op is not None and op.state not in HELD), None)
        rows.append(_row(first, max_attempts, now_ms) if first else None)
    return rows


async def held_for_review(client: RedisClient, partitions: int) -> list[dict[str, Any]]:
    """Operations held for a person, oldest first."""
    rows: list[dict[str, Any]] = []
    for p in range(partitions):
        members: Any = await client.zrange(PartitionKeys(p).review, 0, -1, withscores=True)
        rows += [
            {"operation_id": op_id, "partition": p, "since": int(since)} for op_id, since in members
        ]
    rows.sort(key=lambda r: r["since"])
    return rows


# Stream ids are the Redis server's clock, the times we compare them with are ours.
CLOCK_SKEW_MS = 60_000
CASE_SCAN_PAGE = 500
CASE_SCAN_PAGES = 40


async def scan_cases(
    client: RedisClient, since_ms: int
) -> AsyncGenerator[tuple[str, dict[str, str]], None]:
    """Support cases written at or after ``since_ms`` (minus skew), oldest first, at most
    ``CASE_SCAN_PAGES`` pages: the stream holds up to a million cases and has no index."""
    start = f"{max(0, since_ms - CLOCK_SKEW_MS)}-0"
    for _ in range(CASE_SCAN_PAGES):
        entries: Any = await client.xrange(SUPPORT_CASES, start, "+", count=CASE_SCAN_PAGE)
        for entry_id, fields in entries:
            yield str(entry_id), dict(fields or {})
        if len(entries) < CASE_SCAN_PAGE:
            return
        start = "(" + str(entries[-1][0])


async def operation_cases(
    client: RedisClient, operation: Operation, limit: int = 50
) -> list[dict[str, str]]:
    """The support cases attached to or raised about ``operation`` (ids and states only)."""
    found = []
    async with aclosing(scan_cases(client, operation.created_at)) as entries:
        async for _, fields in entries:
            if fields.get("operation_id") == operation.operation_id:
                found.append(fields)
                if len(found) >= limit:
                    break
    return found

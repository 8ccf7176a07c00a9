"""The stored shape of an operation stays small: nothing derivable, nothing at its default,
listpack-encoded, and every reader (scripts, model, views) agrees on it."""

from __future__ import annotations

from shared import clock, codec, ids
from shared.keys import PartitionKeys
from shared.model import State
from shared.operations import load_attempts, load_operation
from shared.queries import find_operation
from shared.scripts.attempts import BeginAttempt, Finalisation, FinaliseAttempt, FinaliseCode
from tests.sender.conftest import Stack

# Derivable (the id carries the id, partition and creation time; the cooldown is the
# account's; acceptance time is the ledger's) or back at a default once the attempt ends.
NOT_STORED = {"operation_id", "partition", "created_at", "cooldown_until", "accepted_at",
              "attempt_id", "lease_until", "next_attempt_at", "replays"}  # fmt: skip


async def test_an_accepted_operation_stores_nothing_derivable_and_reads_back_whole(
    stack: Stack,
) -> None:
    op = await stack.admit("acct-shape")
    async with stack.sender():
        await stack.wait_state(op, {State.ACCEPTED})
    key = PartitionKeys.of(op).operation(op)
    raw = await stack.redis.hgetall(key)
    assert not NOT_STORED & raw.keys(), NOT_STORED & raw.keys()
    assert await stack.redis.object("encoding", key) == "listpack"
    detail = await find_operation(stack.redis, op, stack.settings().partitions)
    assert detail is not None
    view = detail.view(6)
    assert view["operation_id"] == op
    assert view["partition"] == PartitionKeys.of(op).partition
    assert abs(view["created_at"] - clock.now_ms()) < 60_000
    [row] = view["attempt_ledger"]
    assert (row["number"], row["outcome"], row["http_status"]) == (1, "accepted", 200)
    assert row["ended_at"] >= row["started_at"] >= view["created_at"]
    stored = await stack.redis.lindex(PartitionKeys.of(op).attempts(op), 0)
    assert isinstance(codec.loads(stored), list)  # the compact row, not an object


async def test_a_fresh_operation_is_due_from_its_creation(stack: Stack) -> None:
    op = await stack.admit("acct-fresh")
    operation = await load_operation(stack.redis, op)
    assert operation is not None
    assert operation.state == State.QUEUED
    assert operation.next_attempt_at == operation.created_at == ids.operation_created_ms(op)


async def test_a_ledger_row_written_as_an_object_is_still_finalised(stack: Stack) -> None:
    """A store written before the compact encoding: an in-flight object row is read,
    finalised and shown like a new one."""
    op = await stack.admit("acct-old-row")
    pk = PartitionKeys.of(op)
    now = clock.now_ms()
    begun = await BeginAttempt(
        operation_id=op,
        attempt_id="at-old",
        now=now,
        lease_ms=60_000,
        max_attempts=6,
        consumer="old-sender",
        entry_id="",
        retention_ms=60_000,
    ).run(stack.redis)
    assert begun.attempts == 1
    old = {"attempt_id": "at-old", "started_at": now, "outcome": "in_flight",
           "consumer": "old-sender", "number": 1}  # fmt: skip
    await stack.redis.lset(pk.attempts(op), -1, codec.dumps_str(old))
    result = Finalisation(
        outcome="accepted", http_status=200, next_state="accepted", message_id="msg-old",
        observe_until=now + 1000, decision="done",
    )  # fmt: skip
    done = await FinaliseAttempt(
        operation_id=op,
        attempt_id="at-old",
        now=now + 5,
        entry_id="",
        result=result,
        retention_ms=60_000,
    ).run(stack.redis)
    assert done is FinaliseCode.OK
    [row] = await load_attempts(stack.redis, op)
    assert (row.attempt_id, row.consumer, row.outcome, row.ended_at, row.number) == (
        "at-old", "old-sender", "accepted", now + 5, 1,
    )  # fmt: skip

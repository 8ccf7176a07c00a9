"""The stored shape of an operation stays small: nothing derivable, nothing at its default,
listpack-encoded, and every reader (scripts, model, views) agrees on it."""

from __future__ import annotations

import pytest

from shared import clock, codec, ids
from shared.keys import PartitionKeys
from shared.model import State
from shared.operation_views import find_operation
from shared.operations import load_operation
from tests.sender.conftest import Stack

pytestmark = pytest.mark.cluster_pass  # also on a Redis Cluster: make test-cluster

# Derivable (the id carries the id, partition and creation time; the cooldown is the
# account's; acceptance time is the ledger's) or back at a default once the attempt ends.
NOT_STORED = {
    "operation_id",
    "partition",
    "created_at",
    "cooldown_until",
    "accepted_at",
    "attempt_id",
    "lease_until",
    "next_attempt_at",
    "replays",
}


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

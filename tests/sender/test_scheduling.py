"""Retries are persisted timestamps: nobody sleeps on one, a restart never redraws it."""

from __future__ import annotations

import pytest

from shared import clock
from shared.keys import CONTROL, PartitionKeys
from shared.model import Operation, State
from shared.operations import load_attempts, load_operation
from tests.sender.conftest import Stack, wait_for
from tests.support.sandbox import configure

pytestmark = pytest.mark.cluster_pass  # also on a Redis Cluster: make test-cluster


async def test_invariant_4_a_deferred_retry_blocks_no_worker_and_survives_restart(
    stack: Stack,
) -> None:
    await configure(stack.provider_url, error_every=1)
    slow = await stack.admit("acct-deferred")
    async with stack.sender(concurrency=1, backoff_base_seconds=600, backoff_cap_seconds=600):
        deferred = await wait_for(lambda: _backed_off(stack, slow))
        await configure(stack.provider_url, error_every=0)
        # The only worker is free at once: a later operation is sent while the first waits
        # (its backoff;
        # the bound below is only against a hang).
        fast = await stack.admit("acct-next")
        await stack.wait_state(fast, {State.ACCEPTED}, timeout=60)
    score = await stack.redis.zscore(PartitionKeys.of(slow).due, slow)
    assert score == deferred.next_attempt_at > 0
    [row] = await load_attempts(stack.redis, slow)
    assert row.retry_at == deferred.next_attempt_at
    async with stack.sender():  # a restarted sender keeps the persisted time
        await wait_for(lambda: _stream_empty(stack, slow), timeout=3)
    again = await load_operation(stack.redis, slow)
    assert again is not None and again.state == State.DEFERRED
    assert await stack.redis.zscore(PartitionKeys.of(slow).due, slow) == score


async def _backed_off(stack: Stack, op: str) -> Operation | None:
    """The operation deferred by its backoff after the provider's error (600 s, cut to the
    stack's token horizon: about 50 s), not by a moment's hand-back (a starting sender hands
    back a job it cannot send yet, and it is due again at once)."""
    operation = await load_operation(stack.redis, op)
    later = clock.now_ms() + 10_000
    if operation and operation.state == State.DEFERRED and operation.next_attempt_at > later:
        return operation
    return None


async def _stream_empty(stack: Stack, op: str) -> bool:
    return await stack.redis.xlen(PartitionKeys.of(op).send) == 0


async def test_paused_partition_is_not_sent_until_resumed(stack: Stack) -> None:
    op = await stack.admit("acct-paused")
    partition = PartitionKeys.of(op).partition
    await stack.redis.hset(CONTROL, f"paused:{partition}", "{}")
    async with stack.sender() as sender:
        await wait_for(lambda: _sees_pause(sender, partition))
        operation = await load_operation(stack.redis, op)
        assert operation is not None and operation.state == State.QUEUED
        await stack.redis.hdel(CONTROL, f"paused:{partition}")
        await stack.wait_state(op, {State.ACCEPTED})


async def _sees_pause(sender: object, partition: int) -> bool:
    return partition in sender.state.paused  # type: ignore[attr-defined]

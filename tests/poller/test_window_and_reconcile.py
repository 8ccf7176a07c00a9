"""The observation window (invariant 7: no event is never a failure, never a resend) and
the reconciliation of ambiguous attempts by the poller (invariant 6), on a real sandbox."""

from __future__ import annotations

from shared.keys import PartitionKeys
from shared.model import Delivery, State
from shared.operations import load_attempts, load_operation
from shared.settings import DEFAULT_PROVIDER
from tests.poller.conftest import running_poller, sample
from tests.poller.test_observation_feed import delivery_of
from tests.sender.conftest import Stack, wait_for
from tests.support.sandbox import configure, sandbox_stats

RECONCILED = "resetgate_reconciliations_total"


async def test_invariant_7_window_closes_unknown_and_never_resends(stack: Stack) -> None:
    await configure(stack.provider_url, delivered_delay_seconds=3600)  # no event in time
    op = await stack.admit("acct-silent")
    pk = PartitionKeys.of(op)
    async with stack.sender(observation_window_seconds=1):
        await stack.wait_state(op, {State.ACCEPTED})
        sends = await stack.redis.xlen(pk.send)
        async with running_poller(stack, observation_window_seconds=1):
            closed = await wait_for(lambda: _closed(stack, op))
    assert closed.delivery == Delivery.UNKNOWN, "silence is neither a success nor a failure"
    assert closed.state == State.ACCEPTED
    assert await stack.redis.zscore(pk.observe, op) is None
    assert await stack.redis.xlen(pk.send) == sends
    assert (await sandbox_stats(stack.provider_url, operation_id=op))["sent_by_operation"][op] == 1
    assert len(await load_attempts(stack.redis, op)) == 1


async def _closed(stack: Stack, op: str) -> object:
    operation = await load_operation(stack.redis, op)
    return operation if operation and operation.observation_closed_at else None


async def test_invariant_6_dropped_connection_reconciled_by_the_poller(stack: Stack) -> None:
    # The provider sends the email, then the connection drops: the sender cannot know.
    await configure(stack.provider_url, drop_every=1, delivered_delay_seconds=0.1)
    before = sample(RECONCILED, provider=DEFAULT_PROVIDER, outcome="accepted")
    op = await stack.admit("acct-drop")
    async with stack.sender():
        await stack.wait_state(op, {State.AMBIGUOUS})
        await configure(stack.provider_url, drop_every=0)
        async with running_poller(stack):
            done = await delivery_of(stack, op, {Delivery.DELIVERED})
    assert done.state == State.ACCEPTED and done.provider_message_id
    stats = await sandbox_stats(stack.provider_url, operation_id=op)
    assert stats["sent_by_operation"][op] == 1
    assert stats["duplicate_sends_total"] == 0
    assert sample(RECONCILED, provider=DEFAULT_PROVIDER, outcome="accepted") == before + 1
    ledger = await load_attempts(stack.redis, op)
    assert [(a.outcome, a.reconciled) for a in ledger] == [("ambiguous", "accepted")]


async def test_ambiguous_not_found_is_replayed_once_with_the_same_key(stack: Stack) -> None:
    # Forge the lost-before-the-provider case: the provider never saw this operation's key.
    other = await stack.admit("acct-lost")
    pk = PartitionKeys.of(other)
    await stack.redis.hset(pk.operation(other), mapping={"state": "ambiguous", "ambiguous_at": 1})
    await stack.redis.zadd(pk.ambiguous, {other: 1})
    async with running_poller(stack), stack.sender():
        done = await stack.wait_state(other, {State.ACCEPTED})
    assert done.replays == 1
    stats = await sandbox_stats(stack.provider_url, operation_id=other)
    assert stats["sent_by_operation"][other] == 1


async def test_review_policy_holds_instead_of_replaying(stack: Stack) -> None:
    op = await stack.admit("acct-review")
    pk = PartitionKeys.of(op)
    await stack.redis.hset(pk.operation(op), mapping={"state": "ambiguous", "ambiguous_at": 1})
    await stack.redis.zadd(pk.ambiguous, {op: 1})
    sends = await stack.redis.xlen(pk.send)
    async with running_poller(stack, ambiguous_policy="review"):
        held = await stack.wait_state(op, {State.REVIEW})
    assert held.replays == 0
    assert await stack.redis.zscore(pk.review, op) is not None
    assert await stack.redis.xlen(pk.send) == sends

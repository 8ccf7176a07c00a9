"""Invariant 7 through the feed: acceptance and observed delivery are stored apart, and
delivery moves only on events (late, out of order, duplicated) seen in the provider feed.

Real Redis, the real sandbox over HTTP, the sender and poller loops in this event loop.
"""

from __future__ import annotations

from shared.keys import PartitionKeys, poller_cursor
from shared.model import Delivery, State
from shared.operations import load_operation
from shared.settings import DEFAULT_PROVIDER
from tests.poller.conftest import running_poller, sample
from tests.sender.conftest import Stack, wait_for
from tests.support.sandbox import configure, sandbox_stats

CURSOR = poller_cursor(DEFAULT_PROVIDER)  # the single-provider settings' one feed


async def delivery_of(stack: Stack, operation_id: str, wanted: set[Delivery]) -> object:
    async def probe() -> object:
        operation = await load_operation(stack.redis, operation_id)
        return operation if operation and operation.delivery in wanted else None

    return await wait_for(probe, timeout=15)


async def test_invariant_7_delivery_unknown_until_the_feed_says_delivered(stack: Stack) -> None:
    await configure(stack.provider_url, delivered_delay_seconds=0.6)
    op = await stack.admit("acct-delivered")
    async with stack.sender():
        accepted = await stack.wait_state(op, {State.ACCEPTED})
        # Accepted by the transport is not delivered: nothing is known yet.
        assert accepted.delivery == Delivery.UNKNOWN
        assert await stack.redis.zscore(PartitionKeys.of(op).observe, op) is not None
        async with running_poller(stack):
            done = await delivery_of(stack, op, {Delivery.DELIVERED})
    assert done.state == State.ACCEPTED
    assert done.delivery_observed_at >= accepted.created_at
    assert done.observation_closed_at == 0
    # A definitive event ends the wait: the operation leaves the observation window.
    assert await stack.redis.zscore(PartitionKeys.of(op).observe, op) is None
    assert await stack.redis.get(CURSOR)


async def test_bounce_is_recorded_as_bounced_and_never_resent(stack: Stack) -> None:
    await configure(stack.provider_url, bounce_domain="bounce.example")
    op = await stack.admit("acct-bounce", domain="bounce.example")
    async with stack.sender(), running_poller(stack):
        done = await delivery_of(stack, op, {Delivery.BOUNCED})
    assert done.state == State.ACCEPTED
    stats = await sandbox_stats(stack.provider_url, operation_id=op)
    assert stats["sent_by_operation"][op] == 1


async def test_duplicated_and_out_of_order_events_leave_delivered(stack: Stack) -> None:
    await configure(
        stack.provider_url,
        duplicate_event_every=1,
        out_of_order_every=1,
        delivered_delay_seconds=0.2,
    )
    duplicates = sample("resetgate_delivery_events_duplicate_total")
    late = sample("resetgate_delivery_events_total", type="deferred")
    op = await stack.admit("acct-disorder")
    async with stack.sender(), running_poller(stack):
        await delivery_of(stack, op, {Delivery.DELIVERED})
        # The late "deferred" (occurred before delivered) and the second copy of
        # "delivered" (a fresh event_id) both come after it.
        await wait_for(lambda: _grew("resetgate_delivery_events_duplicate_total", duplicates))
        await wait_for(lambda: _grew("resetgate_delivery_events_total", late, type="deferred"))
    operation = await load_operation(stack.redis, op)
    assert operation is not None and operation.delivery == Delivery.DELIVERED


async def _grew(name: str, before: float, **labels: str) -> bool:
    return sample(name, **labels) > before

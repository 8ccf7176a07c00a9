"""The sender waits for replicas before the provider call (RESETGATE_WAIT_REPLICAS).

A WAIT that falls short hands the attempt back unspent and sends nothing: an email sent on
an attempt the replicas never saw could be sent again after a failover. This Redis has no
replica, so every WAIT for one falls short; once the requirement is dropped the same
operation is sent, once.
"""

from __future__ import annotations

import pytest

from shared.model import State
from shared.operations import load_attempts, load_operation
from tests.sender.conftest import Stack, wait_for
from tests.support.sandbox import sandbox_stats

pytestmark = pytest.mark.cluster_pass  # also on a Redis Cluster: make test-cluster

NOT_REPLICATED = "not_replicated"


async def test_a_wait_that_falls_short_sends_nothing_and_hands_the_attempt_back(
    stack: Stack,
) -> None:
    op = await stack.admit("acct-wait")
    async with stack.sender(wait_replicas=1, wait_timeout_ms=20):
        await wait_for(lambda: _handed_back(stack, op))
    operation = await load_operation(stack.redis, op)
    assert operation is not None
    assert operation.state in (State.DEFERRED, State.QUEUED)
    assert operation.attempts == 0  # refunded: no email could have left
    rows = await load_attempts(stack.redis, op)  # the sender stopped: every attempt ended
    assert rows and all(row.reason == NOT_REPLICATED for row in rows), rows
    stats = await sandbox_stats(stack.provider_url)
    assert stats["sent_by_operation"].get(op, 0) == 0

    async with stack.sender():  # WAIT off: the same operation goes out, once
        await stack.wait_state(op, {State.ACCEPTED})
    stats = await sandbox_stats(stack.provider_url)
    assert stats["sent_by_operation"][op] == 1


async def _handed_back(stack: Stack, op: str) -> bool:
    rows = await load_attempts(stack.redis, op)
    return sum(row.reason == NOT_REPLICATED for row in rows) >= 2

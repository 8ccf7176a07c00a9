"""A sender without the key an operation's token was signed with (issue 10, item 8).

It used to fail every such attempt with a KeyError, burning the operation's budget. Now it
pauses the partition with a reason naming the key, and the attempt is handed back unspent.
"""

from __future__ import annotations

import pytest

from shared import codec
from shared.keys import CONTROL
from shared.model import State
from shared.operations import load_operation
from tests.conftest import TEST_TOKEN_KEYS
from tests.sender.conftest import Stack, wait_for

pytestmark = pytest.mark.cluster_pass  # also on a Redis Cluster: make test-cluster

NEW_KEY_ONLY = "rotated:" + "n" * 32


async def test_a_missing_token_key_pauses_the_partition_and_spends_no_attempt(
    stack: Stack,
) -> None:
    old_kid = TEST_TOKEN_KEYS.split(":", 1)[0]
    op = await stack.admit("acct-kid")  # signed with the current key of TEST_TOKEN_KEYS
    partition = int(op.split("-")[1])
    async with stack.sender(token_keys=NEW_KEY_ONLY):
        note = await wait_for(lambda: stack.redis.hget(CONTROL, f"paused:{partition}"))
    reason = codec.loads(note)["reason"]
    assert repr(old_kid) in reason and "RESETGATE_TOKEN_KEYS" in reason
    operation = await load_operation(stack.redis, op)
    assert operation is not None
    assert operation.state in (State.DEFERRED, State.QUEUED)
    assert operation.attempts == 0  # refunded: the budget is intact

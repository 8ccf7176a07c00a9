"""An admission's send job names its account (shared.keys.ACCOUNT_FIELD), so the sender's
directory read goes out beside the attempt's begin and is answered in the same round trip;
the address sent to is still the one the operation's own account has in the directory."""

from __future__ import annotations

import pytest

from shared import clock
from shared.directory import Account, RedisDirectory
from shared.fastredis import fast_client
from shared.keys import ACCOUNT_FIELD, JOB_FIELD, PartitionKeys
from shared.model import State
from shared.scripts.attempts import BeginCode
from tests.conftest import CLUSTER
from tests.sender.conftest import Stack
from tests.support.attempts import begin
from tests.support.sandbox import sent_emails

pytestmark = pytest.mark.skipif(CLUSTER, reason="FastRedis is standalone Redis only")


async def test_an_admissions_send_job_names_its_account(stack: Stack) -> None:
    op = await stack.admit("acct-named")
    ((_, fields),) = await stack.redis.xrange(PartitionKeys.of(op).send)
    assert fields == {JOB_FIELD: op, ACCOUNT_FIELD: "acct-named"}


async def test_the_account_read_is_answered_with_the_begin(stack: Stack) -> None:
    op = await stack.admit("acct-beside")
    fast = fast_client(stack.redis)
    try:
        await fast.ping()  # connected, as a sender's link is after its first command
        asked = RedisDirectory(fast).asked("acct-beside")
        assert asked is not None
        begun = await begin(fast, op, "attempt-1", clock.now_ms(), lease_ms=60_000)
        assert (begun.code, begun.account_id) == (BeginCode.BEGIN, "acct-beside")
        # Written before the begin, on the same link: its reply came with the begin's.
        assert asked._reply.done()
        account = await asked.account()
        assert account == Account("acct-beside", "acct-beside@example.com")
    finally:
        await fast.aclose()


async def test_a_client_that_writes_on_await_is_not_asked_ahead(stack: Stack) -> None:
    assert RedisDirectory(stack.redis).asked("acct-plain") is None  # plain redis-py


async def test_a_job_naming_another_account_is_sent_to_the_operations_own(
    stack: Stack,
) -> None:
    op = await stack.admit("acct-own")
    await RedisDirectory(stack.redis).add("login-other", Account("acct-other", "other@example.com"))
    send = PartitionKeys.of(op).send
    await stack.redis.xtrim(send, maxlen=0)
    await stack.redis.xadd(send, {JOB_FIELD: op, ACCOUNT_FIELD: "acct-other"})
    async with stack.sender():
        await stack.wait_state(op, {State.ACCEPTED})
    (sent,) = await sent_emails(stack.provider_url, operation_id=op)
    assert "acct-own@example.com" in str(sent)
    assert "other@example.com" not in str(sent)

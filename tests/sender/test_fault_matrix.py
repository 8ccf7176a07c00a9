"""The seed fault matrix: every fault ends in an asserted state and ledger.

Real Redis, the real sandbox over HTTP, the sender's own loops in this event loop.
"""

from __future__ import annotations

import pytest

from services.poller.ambiguity import Resolution
from shared import clock
from shared.control import read as read_control
from shared.keys import CONTROL, JOB_FIELD, PartitionKeys
from shared.model import State
from shared.operations import load_attempts
from shared.scripts.attempts import BeginCode
from shared.settings import DEFAULT_PROVIDER
from shared.tokens import parse_keys
from tests.conftest import TEST_TOKEN_KEYS
from tests.sender.conftest import Stack, wait_for
from tests.support.sandbox import configure, sandbox_stats, sent_emails

pytestmark = pytest.mark.cluster_pass  # also on a Redis Cluster: make test-cluster

DONE = {State.ACCEPTED, State.FAILED, State.EXHAUSTED, State.EXPIRED}


async def emails_for(stack: Stack, operation_id: str) -> int:
    stats = await sandbox_stats(stack.provider_url, operation_id=operation_id)
    return int(stats["sent_by_operation"][operation_id])


async def test_invariant_5_permanent_4xx_fails_and_never_enters_the_due_set(stack: Stack) -> None:
    await configure(stack.provider_url, reject_domain="blocked.example")
    op = await stack.admit("acct-perm", domain="blocked.example")
    async with stack.sender():
        done = await stack.wait_state(op, DONE)
    assert done.state == State.FAILED
    assert done.last_status == 422
    assert await stack.redis.zscore(PartitionKeys.of(op).due, op) is None
    attempts = await load_attempts(stack.redis, op)
    assert [a.outcome for a in attempts] == ["permanent"]


@pytest.mark.parametrize(
    ("form", "source"),
    [
        ("delay-seconds", "delta"),
        ("imf-fixdate", "date"),
        ("rfc850", "date"),
        ("asctime", "date"),
        ("malformed", "invalid"),
        ("absent", "absent"),
    ],
)
async def test_invariant_4_429_is_scheduled_from_retry_after(
    stack: Stack, form: str, source: str
) -> None:
    # One send per second, burst one: the second operation is throttled exactly once.
    await configure(
        stack.provider_url, send_rate_per_second=1.0, send_burst=1, retry_after_form=form
    )
    first = await stack.admit("acct-a")
    second = await stack.admit("acct-b")
    # Without usable advice the operation's own backoff (50-200 ms here) and the pacer's
    # short pause are all that space its retries: enough attempts to outlast the 1 s refill.
    async with stack.sender(concurrency=2, max_attempts=20):
        for op in (first, second):
            await stack.wait_state(op, DONE, timeout=20)
    throttled = []
    for op in (first, second):
        rows = await load_attempts(stack.redis, op)
        throttled += [row for row in rows if row.outcome == "throttled"]
        operation = await stack.wait_state(op, DONE)
        assert operation.state == State.ACCEPTED
        assert await emails_for(stack, op) == 1
    assert throttled, "the rate limit never answered 429"
    for row in throttled:
        # The next attempt was a persisted timestamp, not a sleep.
        assert row.retry_at > row.ended_at
        assert row.decision.startswith("retry at")
    assert {row.retry_after_source for row in throttled} == {source}


async def test_invariant_6_dropped_connection_is_ambiguous_then_reconciled(stack: Stack) -> None:
    await configure(stack.provider_url, drop_probability=1.0)
    op = await stack.admit("acct-drop")
    async with stack.sender():
        ambiguous = await stack.wait_state(op, {State.AMBIGUOUS})
    assert ambiguous.last_outcome == "ambiguous"
    assert await stack.redis.zscore(PartitionKeys.of(op).ambiguous, op) is not None
    await configure(stack.provider_url, drop_probability=0.0)
    assert await stack.reconcile(op) is Resolution.ACCEPTED
    done = await stack.wait_state(op, {State.ACCEPTED})
    assert done.provider_message_id
    assert await emails_for(stack, op) == 1


async def test_invariant_6_timeout_after_write_is_ambiguous_and_never_resent(
    stack: Stack,
) -> None:
    # The provider is slow: our 0.5 s timeout fires after the request was written, and the
    # provider records the email after we gave up. Reconciliation finds it: no second email.
    await configure(stack.provider_url, slow_probability=1.0, slow_seconds=1.5)
    op = await stack.admit("acct-slow")
    async with stack.sender(total_timeout_seconds=0.5):
        ambiguous = await stack.wait_state(op, {State.AMBIGUOUS})
    assert ambiguous.reason.startswith("lost:")
    await configure(stack.provider_url, slow_probability=0.0)
    await wait_for(lambda: emails_for(stack, op))
    assert await stack.reconcile(op) is Resolution.ACCEPTED
    assert await emails_for(stack, op) == 1


async def test_invariant_6_worker_dead_before_the_call_is_replayed_once(stack: Stack) -> None:
    # A worker wrote its attempt, then died before the HTTP call: the lease runs out, the
    # attempt turns ambiguous, the provider has nothing, so one replay with the same key.
    op = await stack.admit("acct-dead")
    begun = await stack.abandoned_attempt(op)
    assert begun.code is BeginCode.BEGIN
    async with stack.sender():
        await stack.wait_state(op, {State.AMBIGUOUS})
        assert await stack.reconcile(op) is Resolution.REPLAY
        done = await stack.wait_state(op, {State.ACCEPTED})
    assert done.replays == 1
    assert await emails_for(stack, op) == 1
    rows = await load_attempts(stack.redis, op)
    assert [(r.outcome, r.reconciled) for r in rows] == [("ambiguous", "replay"), ("accepted", "")]


async def test_invariant_10_duplicate_stream_delivery_sends_once(stack: Stack) -> None:
    op = await stack.admit("acct-dup")
    await stack.redis.xadd(PartitionKeys.of(op).send, {JOB_FIELD: op})  # a redelivered job
    async with stack.sender():
        await stack.wait_state(op, {State.ACCEPTED})
        await wait_for(lambda: _stream_drained(stack, op))
    assert await emails_for(stack, op) == 1
    assert len(await load_attempts(stack.redis, op)) == 1


async def _stream_drained(stack: Stack, op: str) -> bool:
    return await stack.redis.xlen(PartitionKeys.of(op).send) == 0


async def test_exhausted_budget_ends_exhausted_with_the_reason(stack: Stack) -> None:
    await configure(stack.provider_url, error_probability=1.0)
    op = await stack.admit("acct-5xx")
    async with stack.sender(max_attempts=3):
        done = await stack.wait_state(op, DONE)
    assert done.state == State.EXHAUSTED
    assert done.reason == "max_attempts"
    attempts = await load_attempts(stack.redis, op)
    assert [a.outcome for a in attempts] == ["transient"] * 3
    assert await emails_for(stack, op) == 0


async def test_horizon_stops_retries_that_would_land_after_token_expiry(stack: Stack) -> None:
    # One send per 1000 s: whichever operation goes second is told to come back long after
    # its token dies, so it is exhausted (reason horizon) instead of delivering a dead link.
    await configure(stack.provider_url, send_rate_per_second=0.001, send_burst=1)
    ops = [await stack.admit(f"acct-h{i}", token_ttl_seconds=300) for i in range(2)]
    async with stack.sender():
        done = [await stack.wait_state(op, DONE) for op in ops]
    assert sorted((d.state, d.reason) for d in done) == [
        (State.ACCEPTED, "accepted"),
        (State.EXHAUSTED, "horizon"),
    ]


async def test_invariant_5_credentials_rejected_pause_without_failing(stack: Stack) -> None:
    await configure(stack.provider_url, revoked_status=401)
    op = await stack.admit("acct-auth")
    async with stack.sender() as sender:
        await wait_for(lambda: _auth_paused(stack))
        assert not sender.sending_allowed()
        operation = await stack.wait_state(op, {State.QUEUED})
        assert operation.attempts == 0  # refunded: our fault, not the player's budget
    await configure(stack.provider_url, revoked_status=0)
    await stack.redis.hdel(CONTROL, f"auth_paused:{DEFAULT_PROVIDER}")
    async with stack.sender():
        done = await stack.wait_state(op, DONE)
    assert done.state == State.ACCEPTED


async def _auth_paused(stack: Stack) -> bool:
    return DEFAULT_PROVIDER in (await read_control(stack.redis)).auth_paused


async def test_invariant_3_every_retry_reuses_id_key_and_token(stack: Stack) -> None:
    await configure(stack.provider_url, error_every=1)
    op = await stack.admit("acct-retry")
    async with stack.sender():
        await wait_for(lambda: _attempted(stack, op, 2))
        await configure(stack.provider_url, error_every=0)
        await stack.wait_state(op, {State.ACCEPTED})
    emails = await sent_emails(stack.provider_url, operation_id=op)
    assert len(emails) == 1
    token = parse_keys(TEST_TOKEN_KEYS).derive(op, "k2")
    assert token in str(emails[0])
    assert emails[0].get("idempotency_key", op) == op
    stats = await sandbox_stats(stack.provider_url, idempotency_key=op)
    assert stats["sent_by_key"][op] == 1
    assert stats["idempotency_body_mismatches_total"] == 0


async def _attempted(stack: Stack, op: str, count: int) -> bool:
    return len(await load_attempts(stack.redis, op)) >= count


async def test_expired_token_is_never_sent(stack: Stack) -> None:
    op = await stack.admit("acct-exp")
    key = PartitionKeys.of(op).operation(op)
    await stack.redis.hset(key, "token_expires_at", clock.now_ms() - 1)
    async with stack.sender():
        done = await stack.wait_state(op, DONE)
    assert done.state == State.EXPIRED
    assert await emails_for(stack, op) == 0


async def test_a_malformed_send_job_is_dropped_and_sending_goes_on(stack: Stack) -> None:
    op = await stack.admit("acct-after-garbage")
    stream = PartitionKeys.of(op).send
    await stack.redis.xadd(stream, {JOB_FIELD: "not-an-operation"})
    await stack.redis.xadd(stream, {"unexpected": "field"})
    await stack.redis.xadd(stream, {JOB_FIELD: "op-99-XYZ"})  # another partition's id
    async with stack.sender():
        await stack.wait_state(op, {State.ACCEPTED})
        await wait_for(lambda: _stream_drained(stack, op))
    assert await emails_for(stack, op) == 1


async def test_a_send_job_that_is_not_utf8_is_dropped_and_sending_goes_on(stack: Stack) -> None:
    """Read with the client's decoding, one such entry failed every read (and every claim)
    of its partition, so nothing behind it was ever sent (shared/consumer.py)."""
    for partition in range(stack.settings().partitions):  # ahead of the job, wherever it lands
        await stack.redis.xadd(PartitionKeys(partition).send, {"op": b"\xff\xfe-not-text"})
    op = await stack.admit("acct-utf8")
    async with stack.sender():
        await stack.wait_state(op, {State.ACCEPTED})
        await wait_for(lambda: _stream_drained(stack, op))
    assert await emails_for(stack, op) == 1

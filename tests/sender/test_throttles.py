"""A 429 is scheduling, not failure: a throttle never spends the attempt budget, is bounded
by the delivery horizon alone, and is still counted on the operation and in its ledger."""

from __future__ import annotations

import random

from services.sender.policy import RetryPolicy, decide
from shared.model import Outcome, State
from shared.operations import load_attempts
from shared.retry_after import RetryAfter, Source
from tests.sender.conftest import Stack
from tests.support.sandbox import configure, sandbox_stats

POLICY = RetryPolicy(
    max_attempts=6,
    backoff_base_ms=500,
    backoff_cap_ms=60_000,
    observation_window_ms=1000,
    max_advised_wait_ms=900_000,
)
HOUR = 3_600_000


def throttled(attempt: int, advice: RetryAfter | None, horizon_at: int = HOUR) -> State:
    final = decide(
        Outcome.THROTTLED,
        429,
        attempt=attempt,
        now=0,
        horizon_at=horizon_at,
        policy=POLICY,
        rng=random.Random(0),
        retry_after=advice,
    )
    assert final.refund, "a throttle is never counted as an attempt"
    return State(final.next_state)


def test_a_throttle_at_the_last_attempt_is_deferred_not_exhausted() -> None:
    for advice in (None, RetryAfter(Source.ABSENT, None), RetryAfter(Source.DELTA, 5000)):
        assert throttled(POLICY.max_attempts, advice) is State.DEFERRED


def test_an_absurd_retry_after_defers_by_the_capped_wait_not_past_the_horizon() -> None:
    absurd = RetryAfter(Source.DELTA, 10**12)
    final = decide(
        Outcome.THROTTLED,
        429,
        attempt=1,
        now=0,
        horizon_at=HOUR,
        policy=POLICY,
        rng=random.Random(0),
        retry_after=absurd,
    )
    assert (final.next_state, final.retry_at) == (State.DEFERRED, POLICY.max_advised_wait_ms)


def test_a_throttle_is_bounded_by_the_horizon_alone() -> None:
    assert throttled(1, RetryAfter(Source.DELTA, 60_000), horizon_at=30_000) is State.EXHAUSTED


async def test_throttles_beyond_max_attempts_are_waited_out_and_each_one_is_recorded(
    stack: Stack,
) -> None:
    """A provider that answers 429 without a wait to every send for longer than the retry
    budget lasts (here 1 attempt and 2 s, a proportionate stand-in for 10 minutes of a
    1 h token): the operation waits it out and is delivered once."""
    await configure(stack.provider_url, send_blackout_seconds=2, retry_after_form="absent")
    op = await stack.admit("acct-throttled")
    async with stack.sender(max_attempts=1, provider_min_rate=0.5, provider_burst=1):
        done = await stack.wait_state(op, {State.ACCEPTED, State.EXHAUSTED}, timeout=30)
    assert done.state is State.ACCEPTED, done.reason
    assert done.throttles >= 2 and done.attempts == 1
    ledger = await load_attempts(stack.redis, op)
    assert [row.outcome for row in ledger].count("throttled") == done.throttles
    stats = await sandbox_stats(stack.provider_url)
    assert stats["send_throttled_total"] == done.throttles and stats["emails_sent_total"] == 1

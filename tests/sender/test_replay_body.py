"""A replay under the same idempotency key is the same email.

The email says "expires in N minutes", composed as of a time. Composed at each attempt's own
time, a replay that crosses a minute boundary carried another body under the same key, which
a provider may refuse (Stripe-style keys answer 422 to a reused key with other parameters)
and the sandbox counts as ``idempotency_body_mismatches_total``. The opposite failure: an
attempt the provider refused outright (a 429) must not freeze the figure, or a reset sent
ten minutes later would promise ten minutes too many.
"""

from __future__ import annotations

from shared import clock
from shared.model import Outcome, State
from shared.scripts.attempts import (
    BeginCode,
    Finalisation,
    FinaliseAttempt,
    ResolveAmbiguous,
)
from tests.sender.conftest import Stack
from tests.support.attempts import begin

MINUTE_MS = 60_000


async def finalise(stack: Stack, op: str, attempt_id: str, now: int, result: Finalisation) -> None:
    await FinaliseAttempt(
        attempt_id=attempt_id,
        now=now,
        entry_id="",
        result=result,
        retention_ms=60_000,
        operation_id=op,
    ).run(stack.redis)


async def test_an_attempt_that_may_have_sent_fixes_the_time_every_later_email_is_composed_as_of(
    stack: Stack,
) -> None:
    op = await stack.admit("acct-5xx")
    start = clock.now_ms()
    first = await begin(stack.redis, op, "at-1", start, lease_ms=30_000)
    assert first.body_at == start
    # A 5xx: the provider may have taken it, so the retry goes out under the same key.
    answer = Finalisation(Outcome.TRANSIENT, 503, State.QUEUED, reason="transient_503")
    await finalise(stack, op, "at-1", start + 100, answer)
    later = await begin(stack.redis, op, "at-2", start + 2 * MINUTE_MS, lease_ms=30_000)
    assert later.code is BeginCode.BEGIN
    assert later.body_at == start


async def test_a_lease_that_ran_out_mid_call_fixes_the_time_for_the_replay(stack: Stack) -> None:
    op = await stack.admit("acct-dead")
    start = clock.now_ms()
    await begin(stack.redis, op, "at-dead", start, lease_ms=1)
    assert (
        await begin(stack.redis, op, "at-next", start + 5, lease_ms=30_000)
    ).code is BeginCode.AMBIGUOUS
    await ResolveAmbiguous(
        now=start + 10,
        decision="replay",
        message_id="",
        observe_until=0,
        reason="replay_same_key",
        retention_ms=60_000,
        operation_id=op,
    ).run(stack.redis)
    replay = await begin(stack.redis, op, "at-replay", start + 3 * MINUTE_MS, lease_ms=30_000)
    assert replay.code is BeginCode.BEGIN
    assert replay.body_at == start


async def test_a_throttled_attempt_leaves_the_next_email_composed_at_its_own_time(
    stack: Stack,
) -> None:
    op = await stack.admit("acct-429")
    start = clock.now_ms()
    await begin(stack.redis, op, "at-1", start, lease_ms=30_000)
    # A 429 proves the provider took nothing: the next email says the minutes truly left.
    throttled = Finalisation(Outcome.THROTTLED, 429, State.QUEUED, reason="throttled", refund=True)
    await finalise(stack, op, "at-1", start + 100, throttled)
    later = start + 2 * MINUTE_MS
    assert (await begin(stack.redis, op, "at-2", later, lease_ms=30_000)).body_at == later

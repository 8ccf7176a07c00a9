"""Retry policy: what an attempt's outcome means for the operation. Pure functions.

The cooldown (admission) limits new intent; this limits attempts for accepted intent.
Nothing here sleeps: a retry is a timestamp the finalise script persists.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from shared.model import Outcome, State
from shared.retry_after import RetryAfter, Source
from shared.scripts.attempts import Finalisation


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int
    backoff_base_ms: int
    backoff_cap_ms: int
    observation_window_ms: int
    # RESETGATE_MAX_ADVISED_WAIT_SECONDS: the longest an advised wait defers an operation,
    # as it is the longest it blocks the provider-wide schedule.
    max_advised_wait_ms: int = 900_000


def backoff_ms(attempt: int, policy: RetryPolicy, rng: random.Random) -> int:
    """Capped exponential backoff with full jitter: uniform(0, min(cap, base * 2^(n-1)))."""
    ceiling = min(policy.backoff_cap_ms, policy.backoff_base_ms * 2 ** min(attempt - 1, 30))
    return max(1, int(rng.uniform(0, ceiling)))


def decide(
    outcome: Outcome,
    status: int,
    *,
    attempt: int,
    now: int,
    horizon_at: int,
    policy: RetryPolicy,
    rng: random.Random,
    retry_after: RetryAfter | None = None,
    message_id: str = "",
    reason: str = "",
    pause: str = "credentials",
) -> Finalisation:
    """The finalisation for one attempt's outcome (``pause``: what an AUTH outcome pauses
    the provider for, see shared.control.PauseKind)."""
    if outcome is Outcome.ACCEPTED:
        return Finalisation(
            outcome,
            status,
            State.ACCEPTED,
            message_id=message_id,
            observe_until=now + policy.observation_window_ms,
            reason=reason or "accepted",
            decision="done",
        )
    if outcome is Outcome.PERMANENT:
        return Finalisation(
            outcome,
            status,
            State.FAILED,
            reason=reason or f"http_{status}",
            decision="never retried",
        )
    if outcome is Outcome.AUTH:
        # Our credentials or account are refused, not the player's request: requeue, refund.
        return Finalisation(
            outcome,
            status,
            State.QUEUED,
            reason="credentials_rejected" if pause == "credentials" else f"provider_paused_{pause}",
            refund=True,
            decision="requeued; provider paused",
        )
    if outcome is Outcome.AMBIGUOUS:
        return Finalisation(
            outcome,
            status,
            State.AMBIGUOUS,
            reason=reason or "outcome_unknown",
            decision="reconcile before replay",
        )
    if outcome is Outcome.THROTTLED:
        return _throttled(
            status,
            now=now,
            horizon_at=horizon_at,
            policy=policy,
            rng=rng,
            retry_after=retry_after,
            reason=reason or "throttled",
        )
    source = retry_after.source if retry_after else ""
    delay = backoff_ms(attempt, policy, rng)
    if attempt >= policy.max_attempts:
        return _exhausted(outcome, status, "max_attempts", source)
    return _deferred(
        outcome, status, now + delay, horizon_at, source, reason or f"transient_{status}"
    )


def _throttled(
    status: int,
    *,
    now: int,
    horizon_at: int,
    policy: RetryPolicy,
    rng: random.Random,
    retry_after: RetryAfter | None,
    reason: str,
) -> Finalisation:
    """A throttle proves the provider did not take the email: scheduling, not failure. It
    never spends the attempt budget (refunded) and is bounded by the horizon alone. Its
    retry waits as advised (never longer than the provider-wide block may: one absurd
    Retry-After must not cost the player a reset), else a first-attempt backoff: the shared
    pacing, not this operation's clock, is what spaces sends to a throttling provider."""
    source = retry_after.source if retry_after else ""
    if retry_after is not None and retry_after.delay_ms is not None:
        delay = min(retry_after.delay_ms, policy.max_advised_wait_ms)
    else:
        delay = backoff_ms(1, policy, rng)
        if source in (Source.ABSENT, Source.INVALID):
            reason = f"{reason}; retry-after {source}, backoff"
    return _deferred(
        Outcome.THROTTLED,
        status,
        now + delay,
        horizon_at,
        source,
        reason,
        refund=True,
        why="; throttled, attempt not spent",
    )


def _deferred(
    outcome: Outcome,
    status: int,
    retry_at: int,
    horizon_at: int,
    source: str,
    reason: str,
    *,
    refund: bool = False,
    why: str = "",
) -> Finalisation:
    """Retried at ``retry_at``, unless that is at or past the horizon: never deliver a dead
    link or outlive the provider's idempotency window."""
    if retry_at >= horizon_at:
        return _exhausted(outcome, status, "horizon", source, refund=refund)
    return Finalisation(
        outcome,
        status,
        State.DEFERRED,
        retry_at=retry_at,
        reason=reason,
        retry_after_source=source,
        refund=refund,
        decision=f"retry at {retry_at}{why}",
    )


def _exhausted(
    outcome: Outcome, status: int, reason: str, source: str, *, refund: bool = False
) -> Finalisation:
    return Finalisation(
        outcome,
        status,
        State.EXHAUSTED,
        reason=reason,
        retry_after_source=source,
        refund=refund,
        decision="exhausted",
    )

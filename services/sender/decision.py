"""What an attempt's answer, or the lack of one, means for its operation: the finalisation,
by the pure retry policy (services/sender/policy.py), with the provider's Retry-After read."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime

from services.sender.guard import undocumented
from services.sender.message import Unsent
from services.sender.policy import RetryPolicy, decide
from services.sender.settings import SenderSettings
from shared import metrics, retry_after
from shared.model import Outcome, State
from shared.providers.base import SendResult
from shared.scripts.attempts import Begun, Finalisation


class Decisions:
    def __init__(self, settings: SenderSettings, provider: str) -> None:
        """``provider``: the name the Retry-After metric is labelled with."""
        self.provider = provider
        self.rng = random.Random()
        self.policy = RetryPolicy(
            max_attempts=settings.max_attempts,
            backoff_base_ms=settings.backoff_base_ms,
            backoff_cap_ms=settings.backoff_cap_ms,
            observation_window_ms=settings.observation_window_ms,
            max_advised_wait_ms=settings.max_advised_wait_ms,
        )

    def unsent(self, unsent: Unsent, begun: Begun, now: int) -> Finalisation:
        """Nothing was sent: failed for good, or back to the queue with the attempt refunded."""
        if unsent.failed:
            return Finalisation(
                Outcome.PERMANENT, 0, State.FAILED, reason=unsent.reason, decision="never retried"
            )
        return self._refunded(begun, now, unsent.reason, attempt=begun.attempts)

    def answer(self, result: SendResult, begun: Begun, now: int) -> Finalisation:
        advice = None
        if result.outcome is Outcome.THROTTLED:
            advice = retry_after.parse(result.retry_after, datetime.now(UTC), result.server_date)
            if result.retry_source and advice.delay_ms is not None:
                advice = retry_after.RetryAfter(
                    retry_after.Source(result.retry_source), advice.delay_ms
                )
            metrics.retry_after_source.labels(self.provider, advice.source).inc()
        if undocumented(result):
            return self._waiting(result, begun, now)
        return decide(
            result.outcome,
            result.status,
            attempt=begun.attempts,
            now=now,
            horizon_at=begun.horizon_at,
            policy=self.policy,
            rng=self.rng,
            retry_after=advice,
            message_id=result.message_id,
            reason="replayed" if result.replayed else result.reason,
            pause=result.pause,
        )

    def _waiting(self, result: SendResult, begun: Begun, now: int) -> Finalisation:
        """A refusal nobody documents: whose it is is unknown, so the operation is not
        failed. It waits a first attempt's backoff, attempt refunded (only the delivery
        horizon ends it), and the refusals guard counts it."""
        final = self._refunded(begun, now, result.reason, attempt=1, status=result.status)
        return replace(
            final,
            outcome=Outcome.PERMANENT,
            decision=f"{final.decision}; undocumented refusal, waits",
        )

    def _refunded(
        self, begun: Begun, now: int, reason: str, *, attempt: int, status: int = 0
    ) -> Finalisation:
        """A retry after the ``attempt``-th backoff that does not spend the attempt."""
        final = decide(
            Outcome.TRANSIENT,
            status,
            attempt=attempt,
            now=now,
            horizon_at=begun.horizon_at,
            policy=self.policy,
            rng=self.rng,
            reason=reason,
        )
        return replace(final, refund=True)

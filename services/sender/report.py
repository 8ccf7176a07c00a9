"""What an attempt says when it ends: its log line and its counters."""

from __future__ import annotations

import logging

from services.sender.job import Job
from shared import metrics
from shared.logging import event
from shared.model import TERMINAL, State
from shared.scripts.attempts import BeginCode, Begun, Finalisation

log = logging.getLogger(__name__)


def not_begun(provider: str, job: Job, begun: Begun) -> None:
    """An attempt its begin refused (ambiguous, exhausted, expired, settled)."""
    partition = str(job.partition)
    if begun.code is BeginCode.AMBIGUOUS:
        metrics.ambiguous_attempts.labels(provider, partition).inc()
    elif begun.code is BeginCode.EXHAUSTED:
        metrics.operations_exhausted.labels(partition, begun.detail).inc()
        metrics.operations_terminal.labels(partition, State.EXHAUSTED).inc()
    elif begun.code is BeginCode.EXPIRED:
        metrics.operations_terminal.labels(partition, State.EXPIRED).inc()
    if begun.code is not BeginCode.SKIP:
        event(
            log,
            logging.INFO,
            "operation not attempted",
            operation_id=job.operation_id,
            result=str(begun.code),
            detail=begun.detail,
        )


def finished(provider: str, job: Job, attempt: int, final: Finalisation, applied: bool) -> None:
    """An attempt finalised; ``applied``: False when fenced (its lease was lost, nothing
    was written)."""
    partition = str(job.partition)
    metrics.send_attempts.labels(provider, final.outcome).inc()
    if applied:
        if final.next_state == State.AMBIGUOUS:
            metrics.ambiguous_attempts.labels(provider, partition).inc()
        if final.next_state == State.EXHAUSTED:
            metrics.operations_exhausted.labels(partition, final.reason).inc()
        if final.next_state in TERMINAL:
            metrics.operations_terminal.labels(partition, final.next_state).inc()
    event(
        log,
        logging.INFO if applied else logging.WARNING,
        "attempt finished",
        operation_id=job.operation_id,
        attempt=attempt,
        outcome=final.outcome,
        status=final.http_status,
        state=final.next_state,
        reason=final.reason,
        retry_at=final.retry_at or None,
        fenced=not applied,
    )

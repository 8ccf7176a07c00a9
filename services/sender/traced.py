"""The sender's spans: where an attempt's trace comes from, and what its spans may say.

A job admission added carries the admission's ``traceparent`` and ``tracestate``
(shared.keys.TRACE_FIELD): its attempt is a child of the admission, one trace from the click
to the provider's answer (a job handed back or taken over keeps its entry's fields, and so
its place). A retry's job (after a backoff, a replay, a release: shared.keys.RETRY_FIELD)
carries the same context, and its attempt starts a trace of its own linked to it, as the
messaging conventions link a message's processing to its creation: no trace stretches over
hours of backoff. Nothing is read from Redis for a span; a job that carries no context (traces
were off at its admission) starts a trace of its own, unlinked.

Attributes name the work (operation id, partition, attempt, provider) and the provider's
answer (status, outcome, Retry-After); never the recipient, the token or the message.
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, get_current_span

from services.sender.job import Job
from shared import tracing
from shared.keys import RETRY_FIELD, TRACE_FIELD, TRACESTATE_FIELD
from shared.logging import cut, scrub
from shared.providers.base import SendResult

TRACER = tracing.tracer("services.sender")
STATUS = "http.response.status_code"
OUTCOME = "resetgate.outcome"
RETRY_AFTER = "resetgate.retry_after"
NEXT_STATE = "resetgate.next_state"
TAKEN_OVER = "resetgate.taken_over"
_RETRY_AFTER_CHARS = 64  # seconds or an HTTP date; anything longer is not one


def carried(fields: Mapping[str, str]) -> tuple[str, str, bool]:
    """The trace context a send job's entry carries, read leniently (a malformed one only
    starts a trace of the attempt's own), and whether the job is a retry's."""
    return fields.get(TRACE_FIELD, ""), fields.get(TRACESTATE_FIELD, ""), RETRY_FIELD in fields


def origin(job: Job) -> tuple[Context | None, list[Link]]:
    """(parent, links) for an attempt's span: the admission as parent on a first attempt, a
    link to it on a retry (a new trace: an empty context, not the intake's, is its parent)."""
    if not tracing.enabled() or not job.traceparent:
        return None, []
    if job.retry:
        return Context(), tracing.links(job.traceparent, job.tracestate)
    return tracing.continued({TRACE_FIELD: job.traceparent, TRACESTATE_FIELD: job.tracestate}), []


def claimed(job: Job) -> None:
    """The job's claim off its stream (read, or taken over from a consumer gone quiet) up to
    its attempt: the wait for a worker, a pacing slot and the daily quota."""
    if job.claimed_ms:
        with TRACER.start_as_current_span("claim", start_ms=job.claimed_ms) as span:
            span.set_attribute(TAKEN_OVER, job.taken_over)


def answered(span: Span, result: SendResult) -> None:
    """What the provider answered, on the provider call's span."""
    span.set_attribute(STATUS, result.status)
    span.set_attribute(OUTCOME, str(result.outcome))
    if result.retry_after is not None:
        span.set_attribute(RETRY_AFTER, scrub(cut(result.retry_after, _RETRY_AFTER_CHARS)))


def finalised(span: Span, outcome: str, next_state: str) -> None:
    span.set_attribute(OUTCOME, outcome)
    span.set_attribute(NEXT_STATE, next_state)


def attempt_number(attempt: int) -> None:
    get_current_span().set_attribute(tracing.ATTEMPT, attempt)

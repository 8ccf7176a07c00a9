"""The sender's spans: where an attempt's trace comes from, and what its spans may say.

A job admission added carries the admission's ``traceparent`` (shared.keys.TRACE_FIELD): its
attempt is a child of the admission, one trace from the click to the provider's answer. A
job with none is a retry (promote_due.lua adds it after a backoff) or one handed back: its
attempt starts a trace of its own, linked to the admission's (read from the operation hash),
so no trace stretches over hours of backoff. With traces off none of this reads Redis.

Attributes name the work (operation id, partition, attempt, provider) and the provider's
answer (status, outcome, Retry-After); never the recipient, the token or the message.
"""

from __future__ import annotations

from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, get_current_span

from services.sender.job import Job
from shared import tracing
from shared.keys import TRACE_FIELD, PartitionKeys
from shared.logging import cut, scrub
from shared.providers.base import SendResult
from shared.redis import RedisClient

TRACER = tracing.tracer("services.sender")
STATUS = "http.response.status_code"
OUTCOME = "resetgate.outcome"
RETRY_AFTER = "resetgate.retry_after"
NEXT_STATE = "resetgate.next_state"
TAKEN_OVER = "resetgate.taken_over"
_RETRY_AFTER_CHARS = 64  # seconds or an HTTP date; anything longer is not one


async def origin(
    client: RedisClient, operation_id: str, traceparent: str
) -> tuple[Context | None, list[Link]]:
    """(parent, links) for an attempt's span: the admission as parent when the job carries
    its context, else a link to it (when the operation kept one)."""
    if not tracing.enabled():
        return None, []
    if traceparent:
        return tracing.continued({TRACE_FIELD: traceparent}), []
    stored = await client.hget(PartitionKeys.of(operation_id).operation(operation_id), TRACE_FIELD)
    return None, tracing.links(str(stored or ""))


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

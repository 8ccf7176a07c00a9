"""The poller's spans: delivery events received, each one matched to its operation, and the
lookups that settle an ambiguous attempt.

An event comes hours or days after the reset's trace ended, so its span starts no trace of
the operation's and joins none: it is linked to the admission's span (the ``traceparent``
the operation kept, which ``apply_delivery`` hands back), as the messaging conventions link
a message's processing to its creation. A lookup's span is linked the same way.

Attributes name the work (operation id, partition, provider, the event's type and what
became of it, how many arrived), never the recipient: events are read for ids, a type and a
date only (services/poller/inbound/events.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext

from opentelemetry.trace import Span, SpanKind

from services.poller.observation import AppliedEvent
from shared import tracing
from shared.ids import valid_operation_id
from shared.keys import partition_of_operation
from shared.scripts.observation import Applied

TRACER = tracing.tracer("services.poller")
EVENTS = "resetgate.delivery.events"  # how many events one page, request or batch brought
EVENT_TYPE = "resetgate.delivery.type"  # delivered, deferred, bounced, complained, rejected
ROUTE = "resetgate.route"  # where events came from: the events feed, a message read, a webhook
STATUS = "http.response.status_code"


def received(provider: str, route: str, count: int) -> AbstractContextManager[object]:
    """The span of one page, request or queue batch of events (none for an empty one: an
    idle feed is polled every few seconds)."""
    if not count or not tracing.enabled():
        return nullcontext()
    attributes: dict[str, str | int] = {tracing.PROVIDER: provider, ROUTE: route, EVENTS: count}
    return TRACER.start_as_current_span(
        "delivery events", kind=SpanKind.CONSUMER, attributes=attributes
    )


def matched(outcomes: Sequence[AppliedEvent]) -> None:
    """One span per event matched to an operation, under the span of its batch, linked to
    the operation's admission."""
    if not tracing.enabled():
        return
    for outcome in outcomes:
        if outcome.result is Applied.MISSING:
            continue  # the operation is gone: nothing to name or link
        operation_id = outcome.match.operation_id
        attributes: dict[str, str | int] = {
            tracing.OPERATION_ID: operation_id,
            tracing.PARTITION: partition_of_operation(operation_id),
            EVENT_TYPE: str(outcome.match.event.type),
            tracing.RESULT: str(outcome.result),
        }
        with TRACER.start_as_current_span(
            "delivery event",
            links=tracing.links(outcome.traceparent, outcome.tracestate),
            attributes=attributes,
        ):
            pass


@contextmanager
def lookup(provider: str, operation_id: str, trace: tuple[str, str]) -> Iterator[Span]:
    """The span of one lookup of an ambiguous attempt by its idempotency key."""
    attributes: dict[str, str | int] = {
        tracing.OPERATION_ID: operation_id,
        tracing.PROVIDER: provider,
    }
    if valid_operation_id(operation_id):  # a lookup's id is the provider's echo: never trusted
        attributes[tracing.PARTITION] = partition_of_operation(operation_id)
    with TRACER.start_as_current_span(
        "provider lookup",
        kind=SpanKind.CLIENT,
        links=tracing.links(*trace),
        attributes=attributes,
    ) as span:
        yield span


def looked_up(span: Span, status: int, message_id: str) -> None:
    span.set_attribute(STATUS, status)
    if status == 200:
        span.set_attribute(tracing.RESULT, "found" if message_id else "not found")

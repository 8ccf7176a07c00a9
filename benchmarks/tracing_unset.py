"""What tracing leaves on the sender's path per email when ``OTEL_*`` is unset, timed in one
process: the send job's trace fields read, the attempt's origin, its spans (``send attempt``,
``claim``, ``begin attempt``, ``provider call``, ``finalise attempt``) and their attributes as
services/sender/attempt.py opens them (the Job is built with or without tracing). The storm
cannot resolve a cost this small (its runs differ by 10 % and more on a shared machine);
this times it.

    .venv/bin/python benchmarks/tracing_unset.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from opentelemetry.trace import SpanKind

from services.sender import traced
from services.sender.job import Job
from shared import tracing
from shared.keys import JOB_FIELD

LOOPS = 50_000
ENTRY = {JOB_FIELD: "op-1-01J0000000000000000000000"}  # a job admitted with traces unset


def one_email() -> None:
    traceparent, tracestate, retry = traced.carried(ENTRY)
    job = Job(1, "1-0", ENTRY[JOB_FIELD], traceparent, tracestate, retry, 1, False)
    parent, links = traced.origin(job)
    attributes = {tracing.OPERATION_ID: job.operation_id, tracing.PARTITION: job.partition}
    with traced.TRACER.start_as_current_span(
        "send attempt", parent, SpanKind.CONSUMER, attributes, links, job.claimed_ms
    ):
        traced.claimed(job)
        with traced.TRACER.start_as_current_span("begin attempt"):
            pass
        traced.attempt_number(1)
        with traced.TRACER.start_as_current_span("provider call", kind=SpanKind.CLIENT) as span:
            span.set_attribute(traced.STATUS, 200)
        with traced.TRACER.start_as_current_span("finalise attempt") as span:
            traced.finalised(span, "accepted", "accepted")


def main() -> None:
    assert not tracing.enabled()  # nothing here calls tracing.setup()
    spent = []
    for _ in range(3):
        started = time.process_time()
        for _ in range(LOOPS):
            one_email()
        spent.append((time.process_time() - started) / LOOPS * 1e6)
    print(f"{min(spent):.2f} µs CPU per email (best of 3 x {LOOPS:,} loops), traces unset")


if __name__ == "__main__":
    main()

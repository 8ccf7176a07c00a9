"""A send job: one entry of a partition's send stream, as the intake hands it to a worker."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Job:
    partition: int
    entry_id: str
    operation_id: str
    # The admission's trace context, as the entry carried it (shared.keys.TRACE_FIELD), and
    # whether the entry is a retry's (RETRY_FIELD): its attempt links to that trace.
    traceparent: str = field(default="", compare=False)
    tracestate: str = field(default="", compare=False)
    retry: bool = field(default=False, compare=False)
    claimed_ms: int = field(default=0, compare=False)  # when the intake took it off the stream
    taken_over: bool = field(default=False, compare=False)  # from a consumer gone quiet
    # The operation's account, when the entry names it (shared.keys.ACCOUNT_FIELD; "" when not)
    account_id: str = field(default="", compare=False)

"""Counters behind ``GET /_sandbox/stats``: what the sandbox really did, for assertions."""

from __future__ import annotations

from collections import Counter
from typing import Any

# A duplicate send is a bug in the sandbox or its clients; keep a few examples to look at.
_DUPLICATE_EXAMPLES = 100


class BoundedCounts:
    """Per-key counts that forget the oldest key past ``cap`` (a storm must not grow memory)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.counts: dict[str, int] = {}
        self.forgotten = 0

    def add(self, key: str) -> int:
        count = self.counts.get(key, 0) + 1
        self.counts[key] = count
        if count == 1 and len(self.counts) > self.cap:
            del self.counts[next(iter(self.counts))]
            self.forgotten += 1
        return count


class Stats:
    def __init__(self, max_tracked_keys: int) -> None:
        self.requests_total = 0
        self.requests_by_route: Counter[str] = Counter()
        self.responses_by_status: Counter[int] = Counter()
        self.events: Counter[str] = Counter()
        self.emails_sent_total = 0
        self.sent_by_operation = BoundedCounts(max_tracked_keys)
        self.sent_by_key = BoundedCounts(max_tracked_keys)
        self.duplicate_sends_total = 0
        self.duplicate_keys: list[str] = []

    def count(self, event: str) -> None:
        self.events[event] += 1

    def email_sent(self, idempotency_key: str | None, operation_id: str | None) -> None:
        self.emails_sent_total += 1
        if operation_id is not None:
            self.sent_by_operation.add(operation_id)
        if idempotency_key is None:
            return
        if self.sent_by_key.add(idempotency_key) > 1:
            # Two real sends for one key: the very thing idempotency exists to prevent.
            self.duplicate_sends_total += 1
            if len(self.duplicate_keys) < _DUPLICATE_EXAMPLES:
                self.duplicate_keys.append(idempotency_key)

    def snapshot(self, operation_id: str | None = None, key: str | None = None) -> dict[str, Any]:
        """All counters; per-operation/per-key maps only for the one asked about, if any."""
        body: dict[str, Any] = {
            "requests_total": self.requests_total,
            "requests_by_route": dict(self.requests_by_route),
            "responses_by_status": {str(k): v for k, v in sorted(self.responses_by_status.items())},
            "emails_sent_total": self.emails_sent_total,
            "replays_total": self.events["replay"],
            "conflicts_total": self.events["conflict"],
            "send_throttled_total": self.events["send_throttled"],
            # 429s answered while the sandbox itself ran late (services/sandbox/stalls.py)
            "send_throttled_after_stall_total": self.events["send_throttled_after_stall"],
            "poll_throttled_total": self.events["poll_throttled"],
            "throttled_total": self.events["send_throttled"] + self.events["poll_throttled"],
            "injected_errors_total": self.events["error"],
            "poll_injected_errors_total": self.events["poll_error"],
            "slow_responses_total": self.events["slow"],
            "dropped_connections_total": self.events["drop"],
            "late_errors_total": self.events["late_error"],
            "rejected_total": self.events["rejected"],
            "refused_total": self.events["refused"],
            "bad_requests_total": self.events["bad_request"],
            "auth_failures_total": self.events["auth"],
            "idempotency_body_mismatches_total": self.events["mismatch"],
            "duplicate_sends_total": self.duplicate_sends_total,
            # A provider mode's pushed events (services/sandbox/webhooks.py).
            "webhooks": {
                outcome: self.events[f"webhook_{outcome}"]
                for outcome in ("posted", "retried", "refused", "failed", "dropped")
            },
            "duplicate_keys": list(self.duplicate_keys),
            "operations_tracked": len(self.sent_by_operation.counts),
            "keys_tracked": len(self.sent_by_key.counts),
            "tracking_forgotten": self.sent_by_key.forgotten + self.sent_by_operation.forgotten,
        }
        if operation_id is not None or key is not None:
            body["sent_by_operation"] = _pick(self.sent_by_operation, operation_id)
            body["sent_by_key"] = _pick(self.sent_by_key, key)
        else:
            body["sent_by_operation"] = dict(self.sent_by_operation.counts)
            body["sent_by_key"] = dict(self.sent_by_key.counts)
        return body


def _pick(counts: BoundedCounts, key: str | None) -> dict[str, int]:
    if key is None:
        return {}
    return {key: counts.counts.get(key, 0)}

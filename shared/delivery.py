"""Delivery observation: what an event from the provider's feed means for an operation.

Pure functions, no I/O. Transport acceptance (the operation's ``accepted`` state) is never
touched here; only the separate ``delivery`` field is, and only upwards in precedence:
events arrive late, out of order and more than once (docs/provider-contract.md), so a late
``deferred`` must never hide a ``delivered`` that happened after it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shared.clock import to_ms
from shared.model import Delivery

# Higher wins. ``deferred`` is a transient report; ``delivered`` the receiving server took
# it; ``bounced``/``rejected`` (an asynchronous bounce can follow a ``delivered``) say the
# player will not read it; ``complained`` (marked as spam) happens after a delivery.
# Within a rank (bounced vs rejected, or one type twice) the later occurrence wins, so the
# outcome depends only on what happened, never on the order the feed reported it in.
# The scripts get this table rendered in (shared/scripts ``-- @delivery``).
PRECEDENCE: dict[Delivery, int] = {
    Delivery.UNKNOWN: 0,
    Delivery.DEFERRED: 1,
    Delivery.DELIVERED: 2,
    Delivery.BOUNCED: 3,
    Delivery.REJECTED: 3,
    Delivery.COMPLAINED: 4,
}
# From this rank on an event is definitive: the observation window has nothing left to wait for.
DEFINITIVE_RANK = PRECEDENCE[Delivery.DELIVERED]

# Distinct events each operation remembers for dedupe (slots taken in turn; the scripts get it
# rendered in): a provider cannot grow an operation's hash by sending ever more distinct
# events. An event older than the last this many is not recognised as a copy; applied again,
# precedence keeps what it had (the result is "kept"), so forgetting it changes nothing.
REMEMBERED_EVENTS = 16
EVENT_TYPES: frozenset[str] = frozenset(str(d) for d in Delivery if d is not Delivery.UNKNOWN)
MAX_ID_LENGTH = 256
# The window an event time must fall in to be believed, pulled or pushed: a provider's clock
# may run a little ahead of ours (or behind, for a pushed event dated at the operation's
# creation); nothing we still hold is older than a year (retention is 30 days).
MAX_CLOCK_SKEW_MS = to_ms(10 * 60)
MAX_EVENT_AGE_MS = to_ms(366 * 24 * 3600)


@dataclass(frozen=True, slots=True)
class DeliveryEvent:
    """One feed event, decoded. ``event_id`` is informational: copies may differ in it."""

    message_id: str
    type: Delivery
    occurred_ms: int
    event_id: str = ""

    @property
    def identity(self) -> tuple[str, str, int]:
        """What deduplication keys on (the contract: message_id, type, occurred_at)."""
        return (self.message_id, str(self.type), self.occurred_ms)


def parse_rfc3339_ms(value: str) -> int | None:
    """RFC 3339 with a zone (``Z`` or an offset) -> epoch milliseconds; None if not."""
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    if when.tzinfo is None:
        return None  # a naive time is ambiguous; the contract always sends a zone
    return to_ms(when.timestamp())


def plausible(occurred_ms: int, now_ms: int, created_ms: int | None = None) -> bool:
    """An event time a provider could mean: not beyond clock skew in the future, not older
    than anything we could still hold (year 9999 would outrank every later event; year 1
    would never count). ``created_ms``: the operation's creation, where the event names
    it (a pushed event): nothing about it happened before then, less the skew."""
    oldest = now_ms - MAX_EVENT_AGE_MS if created_ms is None else created_ms - MAX_CLOCK_SKEW_MS
    return oldest <= occurred_ms <= now_ms + MAX_CLOCK_SKEW_MS


def parse_event(raw: Any, now_ms: int) -> DeliveryEvent | None:
    """A feed row -> event, or None when it cannot be used (logged and counted by callers)."""
    if not isinstance(raw, dict):
        return None
    message_id, kind, occurred = raw.get("message_id"), raw.get("type"), raw.get("occurred_at")
    if not isinstance(message_id, str) or not 0 < len(message_id) <= MAX_ID_LENGTH:
        return None
    if kind not in EVENT_TYPES or not isinstance(occurred, str):
        return None
    occurred_ms = parse_rfc3339_ms(occurred)
    if occurred_ms is None or not plausible(occurred_ms, now_ms):
        return None
    event_id = raw.get("event_id")
    return DeliveryEvent(
        message_id,
        Delivery(kind),
        occurred_ms,
        event_id[:MAX_ID_LENGTH] if isinstance(event_id, str) else "",
    )

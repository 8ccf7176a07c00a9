"""In-memory messages, idempotency records and the delivery-event feed, all bounded.

Everything runs on one event loop, so plain dicts are enough: no await happens
between a check and the write that depends on it.
"""

from __future__ import annotations

import heapq
import itertools
import secrets
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

JsonDict = dict[str, Any]


def rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(slots=True)
class Event:
    event_id: str
    message_id: str
    type: str
    occurred_at: float

    def to_json(self) -> JsonDict:
        return {
            "event_id": self.event_id,
            "message_id": self.message_id,
            "type": self.type,
            "occurred_at": rfc3339(self.occurred_at),
        }


@dataclass(slots=True)
class Message:
    """One email the sandbox really "sent". ``body`` is kept for tests only, never logged."""

    id: str
    idempotency_key: str | None
    operation_id: str | None
    created_at: float
    created_mono: float
    fingerprint: int
    body: JsonDict
    response: bytes
    events: list[Event] = field(default_factory=list)

    @property
    def status(self) -> str:
        # Events may arrive out of order: the latest occurrence decides, not the latest arrival.
        if not self.events:
            return "accepted"
        return max(self.events, key=lambda e: e.occurred_at).type

    def summary(self) -> JsonDict:
        return {
            "id": self.id,
            "idempotency_key": self.idempotency_key,
            "status": self.status,
            "created_at": rfc3339(self.created_at),
        }

    def detail(self) -> JsonDict:
        return {
            "id": self.id,
            "status": self.status,
            "created_at": rfc3339(self.created_at),
            "events": [e.to_json() for e in self.events],
        }


@dataclass(slots=True)
class EventPlan:
    """What the feed will say about one accepted message."""

    final_type: str
    delay: float
    duplicate: bool = False
    out_of_order: bool = False
    complaint: bool = False


class Store:
    def __init__(self, max_messages: int, max_events: int, window: float) -> None:
        self.max_messages = max_messages
        self.max_events = max_events
        self.window = window
        self.messages: dict[str, Message] = {}
        self.by_key: dict[str, str] = {}
        self.in_flight: set[str] = set()
        self.feed: list[Event] = []
        self.feed_offset = 0  # cursor value of the event just before feed[0]
        self._pending: list[tuple[float, int, Event]] = []
        self._tiebreak = itertools.count()
        self.evicted_messages = 0
        self.evicted_events = 0

    # -- idempotency -------------------------------------------------------------
    def by_idempotency_key(self, key: str, now_mono: float | None = None) -> Message | None:
        message_id = self.by_key.get(key)
        if message_id is None:
            return None
        message = self.messages.get(message_id)
        now = time.monotonic() if now_mono is None else now_mono
        if message is None or message.created_mono + self.window < now:
            del self.by_key[key]  # outside the window: the key may be used afresh
            return None
        return message

    def record(self, message: Message) -> None:
        self.messages[message.id] = message
        if message.idempotency_key is not None:
            self.by_key[message.idempotency_key] = message.id
        while len(self.messages) > self.max_messages:
            self._evict_oldest()

    def _evict_oldest(self) -> None:
        oldest = self.messages.pop(next(iter(self.messages)))
        key = oldest.idempotency_key
        if key is not None and self.by_key.get(key) == oldest.id:
            del self.by_key[key]
        self.evicted_messages += 1

    def get(self, message_id: str) -> Message | None:
        return self.messages.get(message_id)

    # -- events ------------------------------------------------------------------
    def plan_events(self, message: Message, plan: EventPlan) -> list[tuple[float, Event]]:
        """Queue the message's events; they enter the feed when due (see ``materialize``).
        Returns them with their due (monotonic) times, for a provider mode's webhooks."""
        due = message.created_mono + plan.delay
        occurred = message.created_at + plan.delay
        planned = [self._push(due, message.id, plan.final_type, occurred)]
        if plan.complaint:
            # The player marks the delivered email as spam, one more delay later.
            later = max(plan.delay, 0.001)
            planned.append(self._push(due + later, message.id, "complained", occurred + later))
        if plan.out_of_order:
            # A "deferred" that happened before the final event but is reported after it.
            planned.append(
                self._push(due + 0.001, message.id, "deferred", message.created_at + plan.delay / 2)
            )
        if plan.duplicate:
            # Same (message_id, type, occurred_at), a fresh event_id, one more delay later.
            planned.append(
                self._push(due + max(plan.delay, 0.002), message.id, plan.final_type, occurred)
            )
        if len(self._pending) > self.max_events:
            self._bound_pending()
        return planned

    def _push(self, due: float, message_id: str, kind: str, occurred: float) -> tuple[float, Event]:
        event = Event(f"evt_{secrets.token_hex(8)}", message_id, kind, occurred)
        heapq.heappush(self._pending, (due, next(self._tiebreak), event))
        return due, event

    def materialize(self, now_mono: float | None = None) -> None:
        """Move every due event into the feed (lazily, so no background task is needed)."""
        now = time.monotonic() if now_mono is None else now_mono
        pending = self._pending
        while pending and pending[0][0] <= now:
            self._publish(heapq.heappop(pending)[2])
        self._trim_feed()

    def _bound_pending(self) -> None:
        """Nobody polls during a send-only storm: keep the queue of future events bounded
        by releasing the earliest ones early rather than growing without limit."""
        self.materialize()
        pending = self._pending
        while len(pending) > self.max_events:
            self._publish(heapq.heappop(pending)[2])
        self._trim_feed()

    def _publish(self, event: Event) -> None:
        self.feed.append(event)
        message = self.messages.get(event.message_id)
        if message is not None:
            message.events.append(event)

    def _trim_feed(self) -> None:
        # Trim in batches so the list copy is amortised over many appends.
        excess = len(self.feed) - self.max_events
        if excess > 0 and (excess >= self.max_events // 4 or excess >= 10_000):
            del self.feed[:excess]
            self.feed_offset += excess
            self.evicted_events += excess

    def events_after(self, cursor: int, limit: int) -> tuple[list[Event], int]:
        """Events after ``cursor`` and the cursor to pass next time (unchanged when empty)."""
        start = max(cursor - self.feed_offset, 0)
        page = self.feed[start : start + limit]
        if not page:
            return [], max(cursor, self.feed_offset)
        return page, self.feed_offset + start + len(page)

    def beyond_end(self, cursor: int) -> bool:
        """A cursor this feed never issued: a poller that outlived a restart of this process."""
        return cursor > self.feed_offset + len(self.feed)

    @property
    def pending_events(self) -> int:
        return len(self._pending)

    @property
    def events_stored(self) -> int:
        return len(self.feed)

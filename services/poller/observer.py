"""Applying feed events to operations; the observation window; the message map's upkeep.

An event can name a message no operation knows yet: the sender has not finalised (the
event beat the write), or the attempt is still ambiguous and is reconciled later. Such
events are held in memory and matched again for ``orphan_hold_seconds``; after a
reconciliation the poller also reads the message's events directly, which covers a
restart in between.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from services.poller import observation, traced
from services.poller.observation import AppliedEvent, Match
from services.poller.settings import PollerSettings
from shared import clock, metrics
from shared.clock import to_seconds
from shared.delivery import DeliveryEvent
from shared.logging import event
from shared.redis import RedisClient
from shared.scripts.observation import Applied

log = logging.getLogger(__name__)

Identity = tuple[str, str, int]


@dataclass(slots=True)
class Tally:
    applied: int = 0
    kept: int = 0
    duplicate: int = 0
    missing: int = 0
    held: int = 0

    def add(self, outcome: AppliedEvent) -> None:
        name = outcome.result.value
        setattr(self, name, getattr(self, name) + 1)


def count(outcomes: Sequence[AppliedEvent], now: int) -> Tally:
    """Tally applied events and export them (types, duplicates, lag; with traces on, a span
    per event matched to an operation): the pull feed and the pushed events count alike."""
    traced.matched(outcomes)
    tally = Tally()
    for outcome in outcomes:
        tally.add(outcome)
        if outcome.result is Applied.DUPLICATE:
            metrics.delivery_events_duplicate.inc()
        elif outcome.result in (Applied.APPLIED, Applied.KEPT):
            ev = outcome.match.event
            metrics.delivery_events.labels(str(ev.type)).inc()
            metrics.observation_lag.observe(to_seconds(max(0, now - ev.occurred_ms)))
    return tally


class Orphans:
    """Events no operation claims yet, bounded in number and in age."""

    def __init__(
        self, hold_seconds: float, limit: int, clock_: Callable[[], float] = time.monotonic
    ) -> None:
        self.hold = hold_seconds
        self.limit = limit
        self.clock = clock_
        self.events: dict[Identity, tuple[float, DeliveryEvent]] = {}
        self.dropped = 0
        self.retried = 0.0

    def __len__(self) -> int:
        return len(self.events)

    def candidates(self, every: float = 1.0) -> list[DeliveryEvent]:
        """Held events still worth matching, at most once per ``every`` seconds (a catch-up
        burst of full pages must not re-read thousands of orphans per page)."""
        now = self.clock()
        if not self.events or now - self.retried < every:
            return []
        self.retried = now
        cutoff = now - self.hold
        expired = [key for key, (seen, _) in self.events.items() if seen < cutoff]
        for key in expired:
            del self.events[key]
        self.dropped += len(expired)
        return [ev for _, ev in self.events.values()]

    def settle(self, matched: Sequence[DeliveryEvent], unmatched: Sequence[DeliveryEvent]) -> int:
        """Forget matched events, hold new unmatched ones; returns how many are held now."""
        for ev in matched:
            self.events.pop(ev.identity, None)
        now = self.clock()
        for ev in unmatched:
            if ev.identity not in self.events and len(self.events) < self.limit:
                self.events[ev.identity] = (now, ev)
            elif ev.identity not in self.events:
                self.dropped += 1
        return len(self.events)


class Observer:
    def __init__(self, client: RedisClient, settings: PollerSettings) -> None:
        self.client = client
        self.settings = settings
        self.orphans = Orphans(settings.orphan_hold_seconds, settings.orphan_max)
        self.gc_cursors = [0] * settings.partitions

    async def observe(self, events: Sequence[DeliveryEvent]) -> Tally:
        """Apply a batch of events (plus any held ones) to their operations."""
        candidates = {ev.identity: ev for ev in (*self.orphans.candidates(), *events)}
        batch = list(candidates.values())
        copies = len(events) - sum(1 for ev in events if candidates.get(ev.identity) is ev)
        if copies:  # two copies of one event in the same page: the store never sees the 2nd
            metrics.delivery_events_duplicate.inc(copies)
        mapping = await observation.operations_for(
            self.client, self.settings.partitions, [ev.message_id for ev in batch]
        )
        matches = [Match(ev, mapping[ev.message_id]) for ev in batch if ev.message_id in mapping]
        unmatched = [ev for ev in batch if ev.message_id not in mapping]
        now = clock.now_ms()
        outcomes = await observation.apply_events(self.client, matches, now)
        tally = count(outcomes, now)
        tally.duplicate += copies
        tally.held = self.orphans.settle([m.event for m in matches], unmatched)
        return tally

    async def close_windows(self) -> int:
        """Close every window that ended; delivery stays as observed (often "unknown")."""
        now, closed = clock.now_ms(), 0
        for partition in range(self.settings.partitions):
            while True:
                count = await observation.close_due(self.client, partition, now, batch=500)
                closed += count
                if count < 500:
                    break
        if closed:
            event(
                log,
                logging.INFO,
                "observation windows closed without a definitive event",
                count=closed,
            )
        return closed

    async def publish_pending(self) -> int:
        """Export the accepted operations awaiting a delivery event; returns how many."""
        counts = await observation.pending(self.client, self.settings.partitions, clock.now_ms())
        for partition, count in enumerate(counts):
            metrics.observation_pending.labels(str(partition)).set(count)
        return sum(counts)

    async def collect_garbage(self) -> int:
        """One HSCAN step per partition over the message map; drops entries of operations
        whose retention ran out."""
        dropped = 0
        for partition in range(self.settings.partitions):
            cursor, count = await observation.forget_stale_messages(
                self.client, partition, self.gc_cursors[partition]
            )
            self.gc_cursors[partition] = cursor
            dropped += count
        return dropped

"""Pushed events -> the observation path the pull feed uses (``apply_delivery``).

Pushed events name our operation id, so they are joined by it (never by address, never by
guessing from the message map). Before an event is applied:
- the id must be an operation id of a configured partition, and the operation must exist;
- its date must fall between the operation's creation and a little past now (a provider's
  clock may run ahead): anything else is dropped and counted, never stored as dated;
- an ambiguous attempt is settled as accepted by it, since the provider can only report on
  a message it took (the same transition reconciliation makes after a lookup).
Then ``apply_delivery`` dedupes, ranks and records it exactly as for the pull feed, and gives
an operation with no provider message id the event's.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from services.poller.inbound.events import Drop, Parsed, ProviderEvent
from services.poller.observer import Tally, count
from shared import clock, metrics, observation
from shared.delivery import DeliveryEvent
from shared.ids import operation_created_ms
from shared.keys import PartitionKeys, partition_of_operation
from shared.logging import event as log_event
from shared.model import Delivery
from shared.observation import Match
from shared.operations import resolve_ambiguous
from shared.redis import RedisClient
from shared.settings import PolicySettings

log = logging.getLogger(__name__)

# How far ahead of our clock a provider's event may be dated before it is refused.
MAX_FUTURE_MS = 300_000
SETTLED_REASON = "settled: a delivery event showed the provider had accepted it"


@dataclass(slots=True)
class Result:
    """What became of one request's (or one queue batch's) events."""

    tally: Tally = field(default_factory=Tally)
    dropped: Counter[Drop] = field(default_factory=Counter)
    settled: int = 0
    acceptances: int = 0

    def view(self) -> dict[str, int]:
        t = self.tally
        return {"applied": t.applied, "kept": t.kept, "duplicate": t.duplicate,
                "settled": self.settled, "acceptances": self.acceptances,
                "dropped": sum(self.dropped.values())}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Known:
    state: str
    created_at: int


class Ingest:
    def __init__(self, client: RedisClient, settings: PolicySettings) -> None:
        self.client = client
        self.settings = settings

    async def apply(self, provider: str, parsed: Parsed) -> Result:
        result = Result(dropped=Counter(parsed.dropped))
        for ev in parsed.events:
            metrics.inbound_events.labels(provider, ev.kind).inc()
        known = await self._operations(parsed.events)
        now = clock.now_ms()
        usable = [ev for ev in parsed.events if self._usable(ev, known, now, result)]
        await self._settle(provider, usable, known, now, result)
        matches = [Match(DeliveryEvent(ev.message_id, ev.meaning, ev.occurred_ms), ev.operation_id)
                   for ev in usable if isinstance(ev.meaning, Delivery)]  # fmt: skip
        result.acceptances = len(usable) - len(matches)
        outcomes = await observation.apply_events(self.client, matches, now, record=True)
        result.tally = count(outcomes, now)
        result.dropped[Drop.UNKNOWN_OPERATION] += result.tally.missing
        for reason, n in result.dropped.items():
            metrics.inbound_events_dropped.labels(provider, reason.value).inc(n)
        return result

    def _valid_id(self, operation_id: str) -> bool:
        try:
            return partition_of_operation(operation_id) < self.settings.partitions
        except ValueError:
            return False

    async def _operations(self, events: Sequence[ProviderEvent]) -> dict[str, Known]:
        wanted = (ev.operation_id for ev in events if self._valid_id(ev.operation_id))
        ids = list(dict.fromkeys(wanted))
        if not ids:
            return {}
        pipe = self.client.pipeline(transaction=False)
        for operation_id in ids:
            pipe.hget(PartitionKeys.of(operation_id).operation(operation_id), "state")
        states = await pipe.execute()
        # The creation time is part of the id; the hash does not repeat it.
        return {op: Known(str(state), operation_created_ms(op))
                for op, state in zip(ids, states, strict=True) if state}  # fmt: skip

    @staticmethod
    def _usable(ev: ProviderEvent, known: dict[str, Known], now: int, result: Result) -> bool:
        operation = known.get(ev.operation_id)
        if operation is None:
            result.dropped[Drop.UNKNOWN_OPERATION] += 1
            return False
        # Our clock and the provider's disagree a little: allow that much either side.
        if not operation.created_at - MAX_FUTURE_MS <= ev.occurred_ms <= now + MAX_FUTURE_MS:
            result.dropped[Drop.OUT_OF_RANGE] += 1
            return False
        return True

    async def _settle(
        self, provider: str, events: Sequence[ProviderEvent], known: dict[str, Known], now: int,
        result: Result,
    ) -> None:  # fmt: skip
        """An ambiguous attempt with an event about its message: the provider had it."""
        proofs = {ev.operation_id: ev for ev in events
                  if known[ev.operation_id].state == "ambiguous"}  # fmt: skip
        for operation_id, ev in proofs.items():
            applied, _ = await resolve_ambiguous(
                self.client, operation_id, now=now, decision="accepted",
                message_id=ev.message_id,
                observe_until=now + self.settings.observation_window_seconds * 1000,
                reason=SETTLED_REASON, retention_ms=self.settings.retention_seconds * 1000,
            )  # fmt: skip
            if applied:
                result.settled += 1
                metrics.inbound_settled.labels(provider).inc()
                metrics.reconciliations.labels(provider, "accepted").inc()
                log_event(log, logging.INFO, "ambiguous attempt settled by a delivery event",
                          operation_id=operation_id, provider=provider)  # fmt: skip

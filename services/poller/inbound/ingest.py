"""Pushed events -> the observation path the pull feed uses (``apply_delivery``).

Pushed events name our operation id, so they are joined by it (never by address, never by
guessing from the message map). Before an event is applied, the id must be an operation id
of a configured partition and its date must fall between the operation's creation (the id
carries it) and a little past now (a provider's clock may run ahead): anything else is
dropped and counted, never stored as dated. Then ``apply_delivery`` dedupes, ranks and
records it exactly as for the pull feed (an operation that does not exist is reported
missing and counted as unknown), and gives an operation with no provider message id the
event's. Last, an ambiguous attempt the events named is settled as accepted, since the
provider can only report on a message it took (the transition reconciliation makes after a
lookup). A batch costs one pipelined round trip, two with acceptance-only events, plus one
call per ambiguous attempt.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from services.poller import observation, traced
from services.poller.ambiguity import Resolution
from services.poller.inbound.events import Drop, Parsed, ProviderEvent
from services.poller.observation import Match
from services.poller.observer import Tally, count
from shared import clock, metrics, ownership
from shared.delivery import DeliveryEvent, plausible
from shared.ids import operation_created_ms
from shared.keys import PartitionKeys, partition_of_operation
from shared.logging import event as log_event
from shared.model import Delivery, State
from shared.redis import RedisClient
from shared.scripts.attempts import ResolveAmbiguous, Settled
from shared.settings import PolicySettings

log = logging.getLogger(__name__)

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
        return {
            "applied": t.applied,
            "kept": t.kept,
            "duplicate": t.duplicate,
            "settled": self.settled,
            "acceptances": self.acceptances,
            "dropped": sum(self.dropped.values()),
        }


class Ingest:
    """One request's (or one queue batch's) events in as few round trips as the store allows:
    the delivery events in one pipelined call of ``apply_delivery`` per event (which reports
    each operation's state), acceptance-only events in one pipelined state read; then the
    ambiguous attempts among them are settled."""

    def __init__(self, client: RedisClient, settings: PolicySettings) -> None:
        self.client = client
        self.settings = settings

    async def apply(
        self, provider: str, parsed: Parsed, senders: frozenset[str] | None = None
    ) -> Result:
        """``provider``: the source (metrics label); ``senders``: the configured providers
        it speaks for (None: any), an event about an operation another one holds is dropped."""
        with traced.received(provider, "pushed", len(parsed.events)):
            return await self._apply(provider, parsed, senders)

    async def _apply(self, provider: str, parsed: Parsed, senders: frozenset[str] | None) -> Result:
        result = Result(dropped=Counter(parsed.dropped))
        for ev in parsed.events:
            metrics.inbound_events.labels(provider, ev.kind).inc()
        now = clock.now_ms()
        usable = [ev for ev in parsed.events if self._usable(ev, now, result)]
        usable = await self._joined(provider, usable, senders, result)
        matches = [
            Match(DeliveryEvent(ev.message_id, ev.meaning, ev.occurred_ms), ev.operation_id)
            for ev in usable
            if isinstance(ev.meaning, Delivery)
        ]
        proofs = [ev for ev in usable if not isinstance(ev.meaning, Delivery)]
        outcomes = await observation.apply_events(self.client, matches, now, record=True)
        states = await self._states(proofs)
        result.acceptances = len(proofs) - sum(1 for ev in proofs if not states[ev.operation_id])
        result.tally = count(outcomes, now)
        result.dropped[Drop.UNKNOWN_OPERATION] += (
            result.tally.missing + len(proofs) - (result.acceptances)
        )
        ambiguous = {
            o.match.operation_id: o.match.event.message_id
            for o in outcomes
            if o.state == State.AMBIGUOUS
        }
        ambiguous.update(
            {
                ev.operation_id: ev.message_id
                for ev in proofs
                if states[ev.operation_id] == State.AMBIGUOUS
            }
        )
        await self._settle(provider, ambiguous, now, result)
        for reason, n in result.dropped.items():
            metrics.inbound_events_dropped.labels(provider, reason.value).inc(n)
        return result

    def _usable(self, ev: ProviderEvent, now: int, result: Result) -> bool:
        """A well-formed id of a configured partition, dated between the operation's creation
        (the id carries it) and a little past now; whether it exists the store says. One
        event that fails a check is counted and dropped alone: the rest of its batch applies."""
        reason = self._unusable(ev, now)
        if reason is not None:
            result.dropped[reason] += 1
        return reason is None

    def _unusable(self, ev: ProviderEvent, now: int) -> Drop | None:
        try:
            if partition_of_operation(ev.operation_id) >= self.settings.partitions:
                return Drop.UNKNOWN_OPERATION
            created = operation_created_ms(ev.operation_id)
        except ValueError:  # not an operation id: its date cannot even be read
            return Drop.UNKNOWN_OPERATION
        if not plausible(ev.occurred_ms, now, created):
            return Drop.OUT_OF_RANGE
        return None

    async def _joined(
        self,
        source: str,
        events: list[ProviderEvent],
        senders: frozenset[str] | None,
        result: Result,
    ) -> list[ProviderEvent]:
        """The events about operations one of ``senders`` holds (the provider of their latest
        attempt): another provider's event must neither settle nor describe them."""
        if senders is None or not events:
            return events
        ids = list(dict.fromkeys(ev.operation_id for ev in events))
        held = dict(zip(ids, await ownership.owners(self.client, ids), strict=True))
        ours = senders | {""}  # "": no attempt yet, so no provider holds it
        joined = [ev for ev in events if held[ev.operation_id] in ours]
        for ev in events:
            if held[ev.operation_id] not in ours:
                log_event(
                    log,
                    logging.WARNING,
                    "event from a provider that does not hold the operation; dropped",
                    operation_id=ev.operation_id,
                    source=source,
                    holder=held[ev.operation_id],
                )
        result.dropped[Drop.OTHER_PROVIDER] += len(events) - len(joined)
        return joined

    async def _states(self, events: Sequence[ProviderEvent]) -> dict[str, str]:
        """operation id -> state ("" when there is no such operation)."""
        ids = list(dict.fromkeys(ev.operation_id for ev in events))
        if not ids:
            return {}
        pipe = self.client.pipeline(transaction=False)
        for operation_id in ids:
            pipe.hget(PartitionKeys.of(operation_id).operation(operation_id), "state")
        return {op: str(state or "") for op, state in zip(ids, await pipe.execute(), strict=True)}

    async def _settle(
        self, provider: str, proofs: dict[str, str], now: int, result: Result
    ) -> None:
        """An ambiguous attempt with an event about its message: the provider had it. (An
        event applied first that ended the wait keeps the window closed: resolve_ambiguous
        opens it only while delivery is still undecided.)"""
        for operation_id, message_id in proofs.items():
            code, _ = await ResolveAmbiguous(
                operation_id=operation_id,
                now=now,
                decision=Resolution.ACCEPTED,
                message_id=message_id,
                observe_until=now + self.settings.observation_window_ms,
                reason=SETTLED_REASON,
                retention_ms=self.settings.settled_retention_ms,
            ).run(self.client)
            if code is Settled.OK:
                result.settled += 1
                metrics.inbound_settled.labels(provider).inc()
                metrics.reconciliations.labels(provider, Resolution.ACCEPTED).inc()
                log_event(
                    log,
                    logging.INFO,
                    "ambiguous attempt settled by a delivery event",
                    operation_id=operation_id,
                    provider=provider,
                )

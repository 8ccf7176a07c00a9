"""One send attempt: begin (ledger + lease) -> provider call -> finalise (+ XACK).

The attempt is written before the network call and finalised after it, so a process that
dies in between leaves an in-flight row whose lease runs out: it becomes ambiguous and is
reconciled by idempotency key before anything is replayed.

With ``RESETGATE_WAIT_REPLICAS`` set, the begin must also be on that many replicas before
the provider is called: a failover to a replica that never saw it would make an email that
went out look unsent, and a provider without an idempotency key sends it again. A WAIT that
falls short hands the attempt back unspent (``not_replicated``), nothing sent.

What is not the attempt's own lives beside it: the provider's pauses, quota and refusals
guard in :class:`ProviderHealth` (asked before and told after), the message in
:class:`Messages`, the retry decision in :class:`Decisions`, the counters in ``report``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from opentelemetry.trace import SpanKind

from services.sender import report, traced
from services.sender.decision import Decisions
from services.sender.guard import Refused
from services.sender.health import ProviderHealth
from services.sender.job import Job
from services.sender.message import Messages, Ready, Unsent
from services.sender.pacer import Pacer
from services.sender.settings import SenderSettings
from shared import clock, ids, tracing
from shared.directory import Asked
from shared.logging import event
from shared.model import Outcome
from shared.providers.base import Provider, SendResult
from shared.redis import RedisClient
from shared.replication import NotReplicated, Replicas
from shared.scripts.attempts import (
    BeginAttempt,
    BeginCode,
    Begun,
    Finalisation,
    FinaliseAttempt,
    FinaliseCode,
)

log = logging.getLogger(__name__)
# The reason on an attempt handed back because its begin did not reach the replicas in time.
NOT_REPLICATED = "not_replicated"
# Outcomes after which the provider may have taken the send: it stays counted in the quota.
_MAY_HAVE_SENT = frozenset({Outcome.ACCEPTED, Outcome.AMBIGUOUS})


@dataclass(frozen=True, slots=True)
class Pinned:
    """The job's operation is pinned to another provider (shared.ownership), the one that
    decided its replay: nothing was done here, it is sent there."""

    provider: str


@dataclass(frozen=True, slots=True)
class _Sent:
    """The provider's answer, or the finalisation decided without a call, and what it sent."""

    answer: SendResult | Finalisation
    revision: str = ""  # the template revision sent
    recipient: str = ""  # a digest of the address sent to


class AttemptRunner:
    def __init__(
        self,
        settings: SenderSettings,
        client: RedisClient,
        provider: Provider,
        health: ProviderHealth,
        messages: Messages,
        pacer: Pacer,
        replicas: Replicas,
    ) -> None:
        """Sends through ``provider``, named ``health.name``; ``replicas``: the WAIT every
        begin goes through."""
        self.settings = settings
        self.client = client
        self.provider = provider
        self.health = health
        self.name = health.name
        self.messages = messages
        self.pacer = pacer
        self.replicas = replicas
        self.decisions = Decisions(settings, self.name)

    async def run(self, job: Job, slot_ms: float, quota_at: int = 0) -> Pinned | None:
        """One attempt in the pacing slot ``slot_ms`` (the time it was granted); ``quota_at``:
        when its send was taken from the daily quota (0: none)."""
        parent, links = traced.origin(job)
        with traced.TRACER.start_as_current_span(
            "send attempt",
            parent,
            SpanKind.CONSUMER,
            links=links,
            attributes={
                tracing.OPERATION_ID: job.operation_id,
                tracing.PARTITION: job.partition,
                tracing.PROVIDER: self.name,
            },
            start_ms=job.claimed_ms,
        ):
            traced.claimed(job)
            return await self._run(job, slot_ms, quota_at)

    async def _run(self, job: Job, slot_ms: float, quota_at: int) -> Pinned | None:
        # The account's directory read goes out beside the begin (one round trip, one wakeup,
        # not two); unused (not begun, not sent), it is dropped.
        asked = self.messages.ask(job.account_id)
        try:
            return await self._attempt(job, slot_ms, quota_at, asked)
        finally:
            if asked is not None:
                asked.drop()

    async def _attempt(
        self, job: Job, slot_ms: float, quota_at: int, asked: Asked | None
    ) -> Pinned | None:
        attempt_id = ids.attempt_id()
        with traced.TRACER.start_as_current_span("begin attempt"):
            begun, replicated = await self._begin(job, attempt_id)
        traced.attempt_number(begun.attempts)
        if begun.code is not BeginCode.BEGIN:
            await self.health.give_back(quota_at)
            if begun.code is BeginCode.ELSEWHERE:
                return Pinned(begun.detail)
            report.not_begun(self.name, job, begun)
            return None
        if replicated:
            sent = await self._send(job, begun, asked)
        else:
            sent = _Sent(self.decisions.unsent(Unsent(NOT_REPLICATED), begun, clock.now_ms()))
        if isinstance(sent.answer, SendResult):  # first: a 429 voids this process's slots at once
            await self.pacer.observe(sent.answer, slot_ms)
        await self._finalise(job, attempt_id, begun, sent)
        if not isinstance(sent.answer, SendResult) or sent.answer.outcome not in _MAY_HAVE_SENT:
            await self.health.give_back(quota_at)  # nothing reached the player
        return None

    async def _begin(self, job: Job, attempt_id: str) -> tuple[Begun, bool]:
        """The begin, and whether the replicas hold it (always, with no WAIT configured)."""
        begin = BeginAttempt(
            operation_id=job.operation_id,
            attempt_id=attempt_id,
            now=clock.now_ms(),
            lease_ms=self.settings.lease_ms,
            max_attempts=self.settings.max_attempts,
            consumer=self.settings.consumer_name,
            entry_id=job.entry_id,
            retention_ms=self.settings.settled_retention_ms,
            provider=self.name,
        )
        # any of the script's keys names its node: they share the partition's hash tag
        async with self.replicas.connection(begin.keys()[0]) as connection:
            begun = await begin.run(connection)
            if begun.code is not BeginCode.BEGIN:
                return begun, True
            try:
                await self.replicas.wait(connection)
            except NotReplicated as error:
                event(
                    log,
                    logging.WARNING,
                    "attempt not replicated in time; handed back unsent",
                    operation_id=job.operation_id,
                    detail=str(error),
                )
                return begun, False
        return begun, True

    async def _send(self, job: Job, begun: Begun, asked: Asked | None) -> _Sent:
        """The provider call, or the finalisation decided without one (nothing to send)."""
        now = clock.now_ms()
        ready = await self.messages.prepare(job.operation_id, job.partition, begun, asked)
        if not isinstance(ready, Ready):
            return _Sent(self.decisions.unsent(ready, begun, now))
        message = ready.composed.message
        with traced.TRACER.start_as_current_span("provider call", kind=SpanKind.CLIENT) as span:
            result = await self.provider.send(job.operation_id, message)
            traced.answered(span, result)
        return _Sent(result, ready.composed.revision, ready.recipient)

    async def _finalise(self, job: Job, attempt_id: str, begun: Begun, sent: _Sent) -> None:
        now = clock.now_ms()
        result, trip = sent.answer, None
        if isinstance(result, SendResult):
            final = self.decisions.answer(result, begun, now)
            refusal = Refused(job.operation_id, begun.account_id, now, sent.recipient)
            trip = self.health.judge(result, final, refusal)
        else:
            final = result
        final = replace(final, template_revision=sent.revision)
        with traced.TRACER.start_as_current_span("finalise attempt") as span:
            traced.finalised(span, final.outcome, final.next_state)
            code = await FinaliseAttempt(
                operation_id=job.operation_id,
                attempt_id=attempt_id,
                now=now,
                entry_id=job.entry_id,
                result=final,
                retention_ms=self.settings.settled_retention_ms,
            ).run(self.client)
        if isinstance(result, SendResult):
            await self.health.answered(result, trip)
        # not OK: fenced, the lease was lost and nothing was written
        report.finished(self.name, job, begun.attempts, final, code is FinaliseCode.OK)

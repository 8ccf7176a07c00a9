"""One send attempt: begin (ledger + lease) -> provider call -> finalise (+ XACK).

The attempt is written before the network call and finalised after it, so a process that
dies in between leaves an in-flight row whose lease runs out: it becomes ambiguous and is
reconciled by idempotency key before anything is replayed.

With ``RESETGATE_WAIT_REPLICAS`` set, the begin must also be on that many replicas before
the provider is called: a failover to a replica that never saw it would make an email that
went out look unsent, and a provider without an idempotency key sends it again. A WAIT that
falls short hands the attempt back unspent (``not_replicated``), nothing sent.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from opentelemetry.trace import SpanKind

from services.sender import traced
from services.sender.guard import RefusalGuard, Refused, Trip
from services.sender.pacer import Pacer
from services.sender.policy import RetryPolicy, decide
from services.sender.settings import SenderSettings
from shared import clock, control, ids, mailbox, metrics, retry_after, tracing
from shared.directory import Account, Directory, DirectoryError
from shared.emails.compose import Composed, Hosted, Mailer
from shared.emails.files import TemplateError
from shared.logging import event
from shared.model import TERMINAL, Outcome, State
from shared.providers.base import Provider, Refusal, SendResult
from shared.quota import QUOTA_EXCEEDED, DailyQuota, refused_until
from shared.redis import RedisClient
from shared.replication import NotReplicated, Replicas
from shared.scripts.attempts import (
    BeginAttempt,
    BeginCode,
    Begun,
    Finalisation,
    FinaliseAttempt,
    FinaliseCode,
    HoldCode,
    HoldRefused,
)
from shared.tokens import TokenKeys

log = logging.getLogger(__name__)
# The reason on an attempt handed back because its begin did not reach the replicas in time.
NOT_REPLICATED = "not_replicated"
# The note on an operation whose undocumented refusal helped trip the guard: held for review.
HELD_REFUSED = "held: tripped the refusals guard (provider paused); see docs/runbook.md"
# Outcomes after which the provider may have taken the send: it stays counted in the quota.
_MAY_HAVE_SENT = frozenset({Outcome.ACCEPTED, Outcome.AMBIGUOUS})


@dataclass(frozen=True, slots=True)
class Job:
    partition: int
    entry_id: str
    operation_id: str
    traceparent: str = field(default="", compare=False)  # the admission's, on a first attempt


class AttemptRunner:
    def __init__(
        self,
        settings: SenderSettings,
        client: RedisClient,
        provider: Provider,
        directory: Directory,
        keys: TokenKeys,
        pacer: Pacer,
        mailer: Mailer,
        *,
        name: str,
        api_key: str,
        replicas: Replicas | None = None,
        hosted: Hosted | None = None,
        quota: DailyQuota | None = None,
    ) -> None:
        """``name``, ``api_key``: the configured provider it sends through
        (``shared.providers.named``). ``replicas``: the WAIT every begin goes through (None:
        one built from the settings); ``hosted``: the provider's own template, when it sends
        one instead of the local files."""
        self.settings = settings
        self.name = name
        self.api_key = api_key
        self.client = client
        self.provider = provider
        self.directory = directory
        self.keys = keys
        self.pacer = pacer
        self.mailer = mailer
        self.hosted = hosted
        self.rng = random.Random()
        self.policy = RetryPolicy(
            max_attempts=settings.max_attempts,
            backoff_base_ms=settings.backoff_base_ms,
            backoff_cap_ms=settings.backoff_cap_ms,
            observation_window_ms=settings.observation_window_ms,
            max_advised_wait_ms=settings.max_advised_wait_ms,
        )
        self.retention_ms = settings.settled_retention_ms
        self.auth_paused = False
        self.replicas = replicas or Replicas(
            client, settings, settings.wait_replicas, settings.wait_timeout_ms
        )
        self.guard = RefusalGuard(settings.refusal_guard_operations,
                                  settings.refusal_guard_window_ms)  # fmt: skip
        self.quota = quota
        # operation -> a digest of the address its attempt is sending to (the guard counts
        # distinct recipients); dropped as the attempt is finalised.
        self._recipients: dict[str, str] = {}

    async def take_quota(self) -> int | None:
        """One send from the provider's daily quota: when it was taken (ms; 0 when there is
        no quota), or None when the quota is used up (the provider is paused until the
        window rolls over, and the job goes back to wait)."""
        if self.quota is None:
            return 0
        now = clock.now_ms()
        taken = await self.quota.take(self.client, now)
        if taken.taken:
            return now
        if not self.auth_paused:  # workers that were already waiting for a slot: said once
            reason = (f"daily quota of {self.quota.limit} sends used up; sending resumes as "
                      "the window rolls over")  # fmt: skip
            await self._quota_pause(taken.reopens_at, reason)
        return None

    async def _quota_pause(self, until: int, reason: str) -> None:
        self.auth_paused = True  # this replica stops now; the others within a second
        fingerprint = control.key_fingerprint(self.api_key)
        await control.quota_pause(self.client, self.name, until, reason, fingerprint)
        event(log, logging.WARNING, "provider quota used up; sending paused",
              provider=self.name, until=until)  # fmt: skip

    async def run(self, job: Job, slot_ms: float, quota_at: int = 0) -> str:
        """One attempt in the pacing slot ``slot_ms`` (the time it was granted); ``quota_at``:
        when its send was taken from the daily quota (0: none). Returns "" or, for an
        operation pinned to another provider, that provider: nothing was done."""
        parent, links = await traced.origin(self.client, job.operation_id, job.traceparent)
        with traced.TRACER.start_as_current_span(
            "send attempt", parent, SpanKind.CONSUMER, links=links,
            attributes={tracing.OPERATION_ID: job.operation_id,
                        tracing.PARTITION: job.partition, tracing.PROVIDER: self.name},
        ):  # fmt: skip
            return await self._run(job, slot_ms, quota_at)

    async def _run(self, job: Job, slot_ms: float, quota_at: int) -> str:
        attempt_id = ids.attempt_id()
        with traced.TRACER.start_as_current_span("begin attempt"):
            begun, replicated = await self._begin(job, attempt_id)
        traced.attempt_number(begun.attempts)
        if begun.code is not BeginCode.BEGIN:
            await self._unspent(quota_at)
            if begun.code is BeginCode.ELSEWHERE:
                return begun.detail
            self._not_begun(job, begun)
            return ""
        if replicated:
            result, revision = await self._attempt(job, begun)
        else:
            result, revision = self._unreplicated(begun), ""
        if isinstance(result, SendResult):  # first: a 429 voids this process's slots at once
            await self.pacer.observe(result, slot_ms)
        await self._finalise(job, attempt_id, begun, result, revision)
        if not isinstance(result, SendResult) or result.outcome not in _MAY_HAVE_SENT:
            await self._unspent(quota_at)
        return ""

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
            retention_ms=self.retention_ms,
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
                event(log, logging.WARNING, "attempt not replicated in time; handed back unsent",
                      operation_id=job.operation_id, detail=str(error))  # fmt: skip
                return begun, False
        return begun, True

    def _unreplicated(self, begun: Begun) -> Finalisation:
        """Back to the queue unspent: no email left, so the attempt does not count."""
        final = decide(Outcome.TRANSIENT, 0, attempt=begun.attempts, now=clock.now_ms(),
                       horizon_at=begun.horizon_at, policy=self.policy, rng=self.rng,
                       reason=NOT_REPLICATED)  # fmt: skip
        return replace(final, refund=True)

    async def _unspent(self, quota_at: int) -> None:
        """Nothing reached the player: the send taken from the quota goes back."""
        if self.quota is not None and quota_at:
            await self.quota.give_back(self.client, quota_at)

    def _not_begun(self, job: Job, begun: Begun) -> None:
        partition = str(job.partition)
        if begun.code is BeginCode.AMBIGUOUS:
            metrics.ambiguous_attempts.labels(self.name, partition).inc()
        elif begun.code is BeginCode.EXHAUSTED:
            metrics.operations_exhausted.labels(partition, begun.detail).inc()
            metrics.operations_terminal.labels(partition, State.EXHAUSTED).inc()
        elif begun.code is BeginCode.EXPIRED:
            metrics.operations_terminal.labels(partition, State.EXPIRED).inc()
        if begun.code is not BeginCode.SKIP:
            event(
                log,
                logging.INFO,
                "operation not attempted",
                operation_id=job.operation_id,
                result=str(begun.code),
                detail=begun.detail,
            )

    async def _attempt(self, job: Job, begun: Begun) -> tuple[SendResult | Finalisation, str]:
        """The provider call and the template revision it sent, or a finalisation decided
        without one (directory trouble; no revision)."""
        now = clock.now_ms()
        if begun.token_kid and begun.token_kid not in self.keys.secrets:
            return await self._key_missing(job, begun, now), ""
        found = await self._account(begun, now)
        if not isinstance(found, Account):
            return found, ""
        composed = self._compose(job, begun, found, now)
        if isinstance(composed, Finalisation):
            return composed, ""
        self._recipients[job.operation_id] = control.key_fingerprint(found.email)
        with traced.TRACER.start_as_current_span("provider call", kind=SpanKind.CLIENT) as span:
            result = await self.provider.send(job.operation_id, composed.message)
            traced.answered(span, result)
        return result, composed.revision

    def _compose(
        self, job: Job, begun: Begun, account: Account, now: int
    ) -> Composed | Finalisation:
        token = self.keys.derive(job.operation_id, begun.token_kid)
        try:
            return self.mailer.compose(
                account, operation_id=job.operation_id, token=token,
                expires_at_ms=begun.token_expires_at, now_ms=now, hosted=self.hosted,
            )  # fmt: skip
        except TemplateError as error:
            # Every template was rendered at start; one that fails now (a branch only some
            # values reach) is ours to fix, not the player's: retry later, unspent.
            event(log, logging.ERROR, "template failed to render", operation_id=job.operation_id,
                  error=str(error))  # fmt: skip
            final = decide(Outcome.TRANSIENT, 0, attempt=begun.attempts, now=now,
                           horizon_at=begun.horizon_at, policy=self.policy, rng=self.rng,
                           reason="template_error")  # fmt: skip
            return replace(final, refund=True)

    async def _account(self, begun: Begun, now: int) -> Account | Finalisation:
        try:
            account = await self.directory.get_account(begun.account_id)
        except DirectoryError:
            # Not the provider's fault and no email left: the attempt is refunded.
            final = decide(
                Outcome.TRANSIENT,
                0,
                attempt=begun.attempts,
                now=now,
                horizon_at=begun.horizon_at,
                policy=self.policy,
                rng=self.rng,
                reason="directory_unavailable",
            )
            return replace(final, refund=True)
        if account is None:
            return Finalisation(
                Outcome.PERMANENT,
                0,
                State.FAILED,
                reason="account_not_found",
                decision="never retried",
            )
        return _checked_recipient(account, begun)

    async def _key_missing(self, job: Job, begun: Begun, now: int) -> Finalisation:
        """The operation's token was signed with a key this sender lacks (dropped from
        RESETGATE_TOKEN_KEYS too early): no link it could send would verify, and every other
        operation of that key would fail the same way. Pause the partition, naming the key,
        and hand the attempt back unspent."""
        kid = begun.token_kid
        reason = f"token key {kid!r} missing from RESETGATE_TOKEN_KEYS: add it back, then resume"
        await control.pause_partitions(self.client, [job.partition], reason)
        event(log, logging.ERROR, "token key missing; partition paused", kid=kid,
              partition=job.partition, operation_id=job.operation_id)  # fmt: skip
        final = decide(Outcome.TRANSIENT, 0, attempt=begun.attempts, now=now,
                       horizon_at=begun.horizon_at, policy=self.policy, rng=self.rng,
                       reason="token_key_missing")  # fmt: skip
        return replace(final, refund=True)

    async def _finalise(
        self, job: Job, attempt_id: str, begun: Begun, result: SendResult | Finalisation,
        revision: str,
    ) -> None:  # fmt: skip
        now = clock.now_ms()
        final = result if isinstance(result, Finalisation) else self._decide(result, begun, now)
        trip = None
        if isinstance(result, SendResult):
            trip = self._guarded(job, begun, result, final, now)
        final = replace(final, template_revision=revision)
        with traced.TRACER.start_as_current_span("finalise attempt") as span:
            traced.finalised(span, final.outcome, final.next_state)
            code = await FinaliseAttempt(
                operation_id=job.operation_id,
                attempt_id=attempt_id,
                now=now,
                entry_id=job.entry_id,
                result=final,
                retention_ms=self.retention_ms,
            ).run(self.client)
        applied = code is FinaliseCode.OK  # else fenced: the lease was lost, nothing written
        if isinstance(result, SendResult):
            await self._feedback(result)
        if trip is not None:
            await self._trip(trip)
        self._count(job, final, applied)
        event(
            log,
            logging.INFO if applied else logging.WARNING,
            "attempt finished",
            operation_id=job.operation_id,
            attempt=begun.attempts,
            outcome=final.outcome,
            status=final.http_status,
            state=final.next_state,
            reason=final.reason,
            retry_at=final.retry_at or None,
            fenced=not applied,
        )

    def _decide(self, result: SendResult, begun: Begun, now: int) -> Finalisation:
        advice = None
        if result.outcome is Outcome.THROTTLED:
            advice = retry_after.parse(result.retry_after, datetime.now(UTC), result.server_date)
            if result.retry_source and advice.delay_ms is not None:
                advice = retry_after.RetryAfter(retry_after.Source(result.retry_source),
                                                advice.delay_ms)  # fmt: skip
            metrics.retry_after_source.labels(self.name, advice.source).inc()
        if result.outcome is Outcome.PERMANENT and result.refusal is Refusal.UNDOCUMENTED:
            return self._waiting(result, begun, now)
        return decide(
            result.outcome,
            result.status,
            attempt=begun.attempts,
            now=now,
            horizon_at=begun.horizon_at,
            policy=self.policy,
            rng=self.rng,
            retry_after=advice,
            message_id=result.message_id,
            reason="replayed" if result.replayed else result.reason,
            pause=result.pause,
        )

    def _waiting(self, result: SendResult, begun: Begun, now: int) -> Finalisation:
        """A refusal nobody documents: whose it is is unknown, so the operation is not
        failed. It waits a backoff, attempt refunded (only the delivery horizon ends it),
        and the refusals guard counts it."""
        final = decide(Outcome.TRANSIENT, result.status, attempt=1, now=now,
                       horizon_at=begun.horizon_at, policy=self.policy, rng=self.rng,
                       reason=result.reason)  # fmt: skip
        return replace(final, outcome=Outcome.PERMANENT, refund=True,
                       decision=f"{final.decision}; undocumented refusal, waits")  # fmt: skip

    def _guarded(
        self, job: Job, begun: Begun, result: SendResult, final: Finalisation, now: int
    ) -> Trip | None:
        """The refusals guard's say on one answer: the trip it completes, if any. Only an
        undocumented refusal counts (a recipient's never does). The verdict is taken here,
        with no await between the count and ``auth_paused``: no concurrent attempt of this
        process can clear or repeat it."""
        recipient = self._recipients.pop(job.operation_id, "")
        if final.next_state is State.ACCEPTED:
            self.guard.accepted()
        undocumented = (result.outcome is Outcome.PERMANENT
                        and result.refusal is Refusal.UNDOCUMENTED)  # fmt: skip
        if not undocumented or self.auth_paused:
            return None  # refused while paused: it waits; the trip already held its streak
        refusal = Refused(job.operation_id, begun.account_id, now, recipient)
        trip = self.guard.refused(refusal, final.reason)
        if trip is not None:
            self.auth_paused = True  # this process stops now; the others within a second
        return trip

    async def _trip(self, trip: Trip) -> None:
        """Pause the provider (unless another sender or kind paused it first) and hold the
        streak's operations for a person."""
        window = self.guard.window_ms / 1000
        reason = (f"{len(trip.streak)} distinct operations, recipients and accounts refused "
                  f"alike within {window:g} s by an answer no provider page documents: "
                  f"{trip.reason}")  # fmt: skip
        ids = [refused.operation_id for refused in trip.streak]
        fingerprint = control.key_fingerprint(self.api_key)
        wrote = await control.refusals_pause(self.client, self.name, reason, ids, fingerprint)
        held = 0
        if wrote:
            now = clock.now_ms()
            for operation_id in ids:
                code, _ = await HoldRefused(operation_id=operation_id, now=now,
                                            reason=trip.reason, note=HELD_REFUSED).run(
                                                self.client)  # fmt: skip
                held += code is HoldCode.OK
        event(log, logging.ERROR, "provider refuses operations alike; sending paused",
              provider=self.name, reason=trip.reason, operations=len(ids), held=held,
              paused_here=wrote)  # fmt: skip

    async def _feedback(self, result: SendResult) -> None:
        if result.outcome is Outcome.THROTTLED:
            metrics.provider_throttled.labels(self.name).inc()
            if result.reason == QUOTA_EXCEEDED:
                until = refused_until(self.quota, clock.now_ms())
                await self._quota_pause(until, "the provider says its daily quota is used up")
        elif result.outcome is Outcome.AUTH:
            await self._pause(result)

    async def _pause(self, result: SendResult) -> None:
        self.auth_paused = True
        kind = control.PauseKind(result.pause)
        fingerprint = control.key_fingerprint(self.api_key)
        reason = result.detail or result.reason or f"HTTP {result.status}"
        if kind is control.PauseKind.CREDENTIALS:
            reason = f"credentials rejected (HTTP {result.status})" + (
                f": {result.detail}" if result.detail else "")  # fmt: skip
        await control.provider_pause(self.client, self.name, kind, reason,
                                     status=result.status, fingerprint=fingerprint)  # fmt: skip
        event(log, logging.ERROR, "provider refused us; sending paused", provider=self.name,
              status=result.status, kind=str(kind), reason=control.sanitise(reason))  # fmt: skip

    def _count(self, job: Job, final: Finalisation, applied: bool) -> None:
        provider, partition = self.name, str(job.partition)
        metrics.send_attempts.labels(provider, final.outcome).inc()
        if not applied:
            return
        if final.next_state == State.AMBIGUOUS:
            metrics.ambiguous_attempts.labels(provider, partition).inc()
        if final.next_state == State.EXHAUSTED:
            metrics.operations_exhausted.labels(partition, final.reason).inc()
        if final.next_state in TERMINAL:
            metrics.operations_terminal.labels(partition, final.next_state).inc()


def _checked_recipient(account: Account, begun: Begun) -> Account | Finalisation:
    """The directory's address, if it is one mailbox (shared.mailbox); else the operation
    fails naming the directory, and nothing is sent."""
    problem = mailbox.problem(account.email)
    if not problem:
        return account
    event(log, logging.ERROR, "directory address refused; not sent",
          problem=f"the directory's address {problem}",
          account_id=begun.account_id)  # fmt: skip
    return Finalisation(Outcome.PERMANENT, 0, State.FAILED, reason="directory_address_invalid",
                        decision="never retried")  # fmt: skip

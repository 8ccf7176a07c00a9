"""The router's loops: read contact forms in the consumer group, take over abandoned ones,
and route each one to exactly one support case.

The router never sends: an account-access form goes through the admission logic, which
creates an operation (and its one send job) only when the public path would, and
otherwise converges on the account's live operation.
"""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry.context import Context
from opentelemetry.trace import Link, SpanKind, get_current_span

from services.router import cases
from services.router.form import (
    ROUTED_FIELDS,
    ContactForm,
    Malformed,
    account_id_or_blank,
    dead_letter,
    parse_form,
)
from services.router.routing import Facts, case_fields, route
from services.router.settings import RouterSettings
from shared import clock, ids, metrics, tracing
from shared.admit import AdmissionConflict, Admitter
from shared.clock import to_seconds
from shared.consumer import RawFields, StreamConsumer, decode_fields
from shared.directory import Directory, DirectoryError
from shared.keys import (
    CONTACT_FORMS,
    CONTACT_FORMS_DEAD,
    ROUTER_FORM_PREFIX,
    ROUTER_GROUP,
    ROUTER_RETRY,
    TRACE_FIELD,
    TRACESTATE_FIELD,
    PartitionKeys,
)
from shared.logging import event
from shared.loops import ERRORS
from shared.model import EntryPoint
from shared.redis import RedisClient
from shared.scripts.router import Claim, ClaimCode, RouteClaim

log = logging.getLogger(__name__)
TRACER = tracing.tracer(__name__)


def contact_forms(client: RedisClient, consumer: str) -> StreamConsumer:
    """The contact-form stream as ``consumer`` of the routers' group reads it (undecoded:
    a form that is not UTF-8 is dead-lettered, never a crash loop; shared.consumer)."""
    return StreamConsumer(client, CONTACT_FORMS, ROUTER_GROUP, consumer)


async def ensure_group(client: RedisClient) -> None:
    await contact_forms(client, "").ensure_group()


class Router:
    def __init__(
        self,
        settings: RouterSettings,
        client: RedisClient,
        directory: Directory,
        admitter: Admitter,
    ) -> None:
        self.settings = settings
        self.client = client
        self.directory = directory
        self.admitter = admitter
        self.forms = contact_forms(client, settings.consumer_name)
        self.topics = settings.account_topic_set
        self.idle_ms = settings.claim_idle_ms
        self.ttl_ms = settings.seen_ttl_ms
        self.form_ttl_ms = min(settings.form_retention_ms, settings.seen_ttl_ms)

    # -- loops -----------------------------------------------------------------------------
    async def read_step(self) -> float:
        for entry in await self.forms.read(self.settings.read_batch, self.settings.block_ms):
            await self.handle(entry.entry_id, entry.raw)
        return 0.0

    async def claim_step(self) -> float:
        """Forms whose routing failed (a directory outage) or whose router died are retried
        here: entries read but not yet taken over, then taken-over forms that are due."""
        claimed = await self.forms.claim(self.idle_ms, 100)
        for entry in claimed.entries:
            await self.handle(entry.entry_id, entry.raw)
        for entry_id in claimed.deleted:  # deleted while pending: nothing to route
            await self._consume(entry_id)
        now = clock.now_ms()
        for due in await self.client.zrangebyscore(ROUTER_RETRY, "-inf", now, 0, 100):
            entry_id = str(due)
            # Pushed back first, so another router does not take the same form meanwhile.
            await self.client.zadd(ROUTER_RETRY, {entry_id: now + self.idle_ms}, xx=True)
            await self.resume(entry_id)
        return self.settings.claim_idle_seconds / 2

    # -- one entry -------------------------------------------------------------------------
    async def handle(self, entry_id: str, raw: RawFields) -> None:
        # Other fields are never used or copied (only their names reach a dead letter):
        # decoded with replacement instead of refusing the form for their bytes.
        fields, undecodable = decode_fields(raw, ROUTED_FIELDS)
        try:
            if undecodable:
                raise Malformed(undecodable)
            form = parse_form(entry_id, fields, self.topics)
        except Malformed as bad:
            await self._dead_letter(entry_id, fields, bad.reason)
            return
        await self._take_over(form)
        await self._route_or_retry(form)

    async def resume(self, entry_id: str) -> None:
        """Route a form taken over earlier; dead-letter it if its fields ran out (their TTL)
        while it still waited (a form routed meanwhile left the retry set first)."""
        kept = await self.client.hgetall(ROUTER_FORM_PREFIX + entry_id)
        if not kept:
            if await self.client.zscore(ROUTER_RETRY, entry_id) is not None:
                await self._dead_letter(entry_id, {}, "expired")
            return
        raw = {str(k): str(v) for k, v in kept.items()}
        form = ContactForm(
            entry_id,
            raw["event_id"],
            raw["topic"],
            raw["login"],
            raw["account_id"],
            int(raw["submitted_ms"]),
            raw.get(TRACE_FIELD, ""),
            raw.get(TRACESTATE_FIELD, ""),
        )
        now = clock.now_ms()
        if now - int(raw.get("taken_ms") or now) >= self.form_ttl_ms:
            await self._dead_letter(entry_id, _routed_fields(form), "expired")
            return
        await self._route_or_retry(form)

    async def _take_over(self, form: ContactForm) -> None:
        """Keep only what routing needs under our own key, then acknowledge and delete the
        entry. XDEL only marks an entry: its bytes, free text included, are freed once every
        entry of its stream node is gone, so a form left in the stream for a retry kept its
        neighbours' text in Redis (and in RDB files, AOF rewrites, replica syncs). Taken over
        at read, a node is freed as soon as the forms around it have been read."""
        key = ROUTER_FORM_PREFIX + form.entry_id
        kept = {
            "event_id": form.event_id,
            "topic": form.topic,
            "login": form.login,
            "account_id": form.account_id,
            "submitted_ms": str(form.submitted_ms),
            "taken_ms": str(clock.now_ms()),
        }
        kept.update(_trace_fields(form.traceparent, form.tracestate))
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.hset(key, mapping=kept)  # type: ignore[arg-type]
            # Outlives the retention by two retries, so one dead-letters it with its event id.
            pipe.pexpire(key, self.form_ttl_ms + 2 * self.idle_ms)
            pipe.zadd(ROUTER_RETRY, {form.entry_id: clock.now_ms() + self.idle_ms})
            await pipe.execute()
        await self.forms.ack_and_delete(form.entry_id)

    async def _route_or_retry(self, form: ContactForm) -> None:
        try:
            with TRACER.start_as_current_span("contact form", _origin(form), SpanKind.CONSUMER):
                await self._route(form)
        except (DirectoryError, AdmissionConflict, *ERRORS) as error:
            # Kept under our key: claim_step retries it after claim_idle_seconds.
            event(
                log,
                logging.WARNING,
                "contact form not routed yet; will retry",
                event_id=form.event_id,
                error=type(error).__name__,
            )
        except Exception as error:  # one bad form must not stop the router
            # Retrying a form that trips a bug would crash-loop the router on it: park it.
            event(
                log,
                logging.ERROR,
                "contact form could not be routed",
                entry_id=form.entry_id,
                error=type(error).__name__,
            )
            await self._dead_letter(form.entry_id, _routed_fields(form), "routing_error")

    async def _route(self, form: ContactForm) -> None:
        claimed_at = clock.now_ms()
        claim = await RouteClaim(
            event_id=form.event_id,
            case_id=ids.case_id(),
            now=claimed_at,
            ttl_ms=self.ttl_ms,
            stale_ms=self.idle_ms * 3 // 4,
        ).run(self.client)
        if claim.code is ClaimCode.BUSY:
            return
        if claim.code is ClaimCode.DONE:
            await self._ack(form, "duplicate: its case exists")
            return
        if claim.code is ClaimCode.TAKEOVER and await self._finish_takeover(form, claim):
            return
        facts = await self._facts(form)
        if not await cases.still_claimed(self.client, form.event_id, claimed_at):
            # Routing outlived the claim (a slow directory or admission) and another router
            # took it over: it writes the case; this form's retry finds it written.
            event(
                log,
                logging.WARNING,
                "contact form claim taken over while routing; left to the router that took it",
                event_id=form.event_id,
            )
            return
        where = route(facts)
        now = clock.now_ms()
        fields = case_fields(claim.case_id, form.event_id, facts, where, form.submitted_ms, now)
        fields.update(_trace_fields(*tracing.current()))  # the routing's: where the case came from
        entry = await cases.write_case(self.client, fields, self.settings.support_cases_maxlen)
        await cases.mark_written(self.client, form.event_id, entry, self.ttl_ms)
        metrics.support_cases.labels(where.queue, where.priority).inc()
        metrics.routing_latency.observe(to_seconds(max(0, now - form.submitted_ms)))
        await self._ack(
            form,
            "case written",
            case_id=claim.case_id,
            queue=where.queue,
            priority=where.priority,
            state=facts.state or None,
        )

    async def _finish_takeover(self, form: ContactForm, claim: Claim) -> bool:
        """A router died mid-routing: if its case made it to the stream, only ack."""
        entry = await cases.find_case(self.client, claim.case_id, claim.claimed_at)
        if entry is None:
            return False
        await cases.mark_written(self.client, form.event_id, entry, self.ttl_ms)
        await self._ack(form, "recovered a case written before a crash", case_id=claim.case_id)
        return True

    async def _facts(self, form: ContactForm) -> Facts:
        if form.topic not in self.topics:
            # Unverified and copied into a stream: only if it looks like an id (not free text).
            return Facts(form.topic, False, account_id=account_id_or_blank(form.account_id))
        account_id = await self._account(form)
        if not account_id:
            metrics.admissions.labels(EntryPoint.CONTACT_FORM, "unknown_login").inc()
            return Facts(form.topic, account_topic=True)
        admission = await self.admitter.admit(
            account_id, EntryPoint.CONTACT_FORM, actor=f"contact-form:{form.event_id}"
        )
        metrics.admissions.labels(EntryPoint.CONTACT_FORM, admission.result).inc()
        delivery = ""
        if admission.operation_id:
            key = PartitionKeys.of(admission.operation_id).operation(admission.operation_id)
            stored, *trace = await self.client.hmget(
                key, ["delivery", TRACE_FIELD, TRACESTATE_FIELD]
            )
            delivery = str(stored or "")
            _joined(admission.operation_id, str(admission.result), [str(t or "") for t in trace])
        return Facts(
            form.topic,
            True,
            account_id,
            admission.operation_id,
            admission.state,
            str(admission.result),
            delivery,
        )

    async def _account(self, form: ContactForm) -> str:
        if form.account_id:
            account = await self.directory.get_account(form.account_id)
        else:
            account = await self.directory.lookup_login(form.login)
        return account.account_id if account else ""

    async def _dead_letter(self, entry_id: str, fields: dict[str, str], reason: str) -> None:
        record = dead_letter(entry_id, fields, reason, clock.now_ms())
        await self.client.xadd(
            CONTACT_FORMS_DEAD,
            record,  # type: ignore[arg-type]
            maxlen=self.settings.dead_letter_maxlen,
            approximate=True,
        )
        await self._consume(entry_id)
        metrics.contact_forms_dead_lettered.labels(reason).inc()
        event(log, logging.WARNING, "contact form dead-lettered", entry_id=entry_id, reason=reason)

    async def _ack(self, form: ContactForm, message: str, **fields: Any) -> None:
        await self._consume(form.entry_id)
        event(log, logging.INFO, "contact form " + message, event_id=form.event_id, **fields)

    async def _consume(self, entry_id: str) -> None:
        """The form is done with (case or dead letter written first): the entry, if it is
        still there, and the routed fields kept for it. A redelivery is recognised by its
        seen record, not by the entry."""
        await self.forms.ack_and_delete(entry_id)
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.zrem(ROUTER_RETRY, entry_id)  # first: a form whose fields are gone but which
            pipe.delete(ROUTER_FORM_PREFIX + entry_id)  # is still listed ran out, unrouted
            await pipe.execute()


def _origin(form: ContactForm) -> Context | None:
    """The routing span's parent: the form system's trace, when its entry carried one."""
    if not form.traceparent or not tracing.enabled():
        return None
    return tracing.continued({TRACE_FIELD: form.traceparent, TRACESTATE_FIELD: form.tracestate})


def _trace_fields(traceparent: str, tracestate: str) -> dict[str, str]:
    """A trace context as an entry or a hash keeps it: only the fields it has."""
    fields = {TRACE_FIELD: traceparent, TRACESTATE_FIELD: tracestate}
    return {name: value for name, value in fields.items() if value}


def _joined(operation_id: str, result: str, trace: list[str]) -> None:
    """A span in the operation's own trace (a child of its admission, whose traceparent and
    tracestate are ``trace``) saying a contact form came to it, linked to the form's routing
    span: the reset's trace shows the form too."""
    traceparent, tracestate = trace
    if not traceparent:
        return
    attributes: dict[str, str | int] = {
        tracing.OPERATION_ID: operation_id,
        tracing.RESULT: result,
        tracing.PARTITION: PartitionKeys.of(operation_id).partition,
    }
    routing = Link(get_current_span().get_span_context())
    parent = tracing.continued({TRACE_FIELD: traceparent, TRACESTATE_FIELD: tracestate})
    with TRACER.start_as_current_span(
        "form routed", parent, links=[routing], attributes=attributes
    ):
        pass


def _routed_fields(form: ContactForm) -> dict[str, str]:
    """What a dead letter may look at of a taken-over form (it keeps shaped values only)."""
    return {"event_id": form.event_id, "topic": form.topic, "submitted_at": str(form.submitted_ms)}

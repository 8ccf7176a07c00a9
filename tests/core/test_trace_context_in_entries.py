"""Every stream entry that hands an operation on carries the trace context its admission
kept (traceparent and tracestate): a retry's send job (promoted after its backoff, requeued,
replayed after a lookup, released by an operator), marked as a retry's so its attempt starts
a trace of its own linked to the admission's; the archiver's entry when the operation settles
(the settle prelude), when a delivery event reaches it after its archive (``apply_delivery``,
which also hands the context back, for the event's span link) and when the archiver puts it
back on the stream. An operation that kept none (traces off) writes its entries as before,
with no empty field."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from redis.asyncio import Redis

from shared.keys import JOB_FIELD, RETRY_FIELD, TRACE_FIELD, TRACESTATE_FIELD, PartitionKeys
from shared.model import State
from shared.scripts.archive import MarkArchived, Marked
from shared.scripts.attempts import Finalisation, FinaliseAttempt, Quarantine, ResolveAmbiguous
from shared.scripts.jobs import PromoteDue
from shared.scripts.observation import Applied, ApplyDelivery
from tests.core.test_transitions import ATTEMPT, HOUR, NOW, seed

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
TRACESTATE = "game=t61rcWkgMzE,other=00f067aa0ba902b7"
KEPT = {TRACE_FIELD: TRACEPARENT, TRACESTATE_FIELD: TRACESTATE}


async def seeded(redis: Redis, state: State, kept: dict[str, str]) -> str:
    op = await seed(redis, state)
    if kept:
        await redis.hset(PartitionKeys.of(op).operation(op), mapping=kept)  # type: ignore[arg-type]
    return op


async def entries(redis: Redis, stream: str, op: str) -> list[dict[str, str]]:
    return [fields for _, fields in await redis.xrange(stream) if fields[JOB_FIELD] == op]


def finalised(next_state: State, retry_at: int = 0) -> Finalisation:
    return Finalisation(
        outcome="permanent" if next_state is State.FAILED else "transient",
        http_status=400 if next_state is State.FAILED else 503,
        next_state=str(next_state),
        retry_at=retry_at,
        message_id="",
        observe_until=NOW + HOUR,
        reason="why",
    )


async def promoted(redis: Redis, op: str) -> None:
    moved = await PromoteDue(partition=1, now=NOW, operation_ids=(op,)).run(redis)
    assert moved == 1


async def requeued(redis: Redis, op: str) -> None:
    await FinaliseAttempt(
        operation_id=op,
        attempt_id=ATTEMPT,
        now=NOW,
        entry_id="",
        result=finalised(State.QUEUED),
        retention_ms=HOUR,
    ).run(redis)


async def replayed(redis: Redis, op: str) -> None:
    await ResolveAmbiguous(
        now=NOW,
        decision="replay",
        message_id="",
        observe_until=NOW + HOUR,
        reason="not found",
        retention_ms=HOUR,
        operation_id=op,
    ).run(redis)


async def released(redis: Redis, op: str) -> None:
    await Quarantine(action="release", now=NOW, reason="checked", operation_id=op).run(redis)


RETRIES: dict[str, tuple[State, Callable[[Redis, str], Awaitable[None]]]] = {
    "promoted after its backoff": (State.DEFERRED, promoted),
    "requeued by its attempt": (State.ATTEMPTING, requeued),
    "replayed after a lookup": (State.AMBIGUOUS, replayed),
    "released by an operator": (State.QUARANTINED, released),
}


@pytest.mark.parametrize("retry", RETRIES)
async def test_a_retrys_send_job_carries_the_admissions_trace_context_as_a_retrys(
    redis: Redis, retry: str
) -> None:
    state, hand_on = RETRIES[retry]
    op = await seeded(redis, state, KEPT)
    await hand_on(redis, op)
    assert await entries(redis, PartitionKeys.of(op).send, op) == [
        {JOB_FIELD: op, **KEPT, RETRY_FIELD: "1"}
    ]
    bare = await seeded(redis, state, {TRACE_FIELD: TRACEPARENT})  # no tracestate: none written
    await hand_on(redis, bare)
    assert await entries(redis, PartitionKeys.of(bare).send, bare) == [
        {JOB_FIELD: bare, TRACE_FIELD: TRACEPARENT, RETRY_FIELD: "1"}
    ]


@pytest.mark.parametrize("retry", RETRIES)
async def test_with_no_trace_context_kept_a_retrys_job_is_as_before(
    redis: Redis, retry: str
) -> None:
    state, hand_on = RETRIES[retry]
    op = await seeded(redis, state, {})
    await hand_on(redis, op)
    assert await entries(redis, PartitionKeys.of(op).send, op) == [{JOB_FIELD: op}]


async def settled_entry(redis: Redis, kept: dict[str, str]) -> tuple[str, dict[str, str]]:
    """An operation (keeping ``kept``) failed with the archive on; its id and the fields of
    the entry that hands it to the archiver."""
    op = await seeded(redis, State.ATTEMPTING, kept)
    await FinaliseAttempt(
        operation_id=op,
        attempt_id=ATTEMPT,
        now=NOW,
        entry_id="",
        result=finalised(State.FAILED),
        retention_ms=0,
    ).run(redis)
    (fields,) = await entries(redis, PartitionKeys.of(op).settled, op)
    return op, fields


async def event_after_archive(
    redis: Redis, op: str
) -> tuple[tuple[Applied, str, str, str, str], dict[str, str]]:
    pk = PartitionKeys.of(op)
    await redis.hset(pk.operation(op), "archived_at", NOW + 1)
    reply = await ApplyDelivery(
        message_id="msg-" + op,
        event_type="bounced",
        occurred_at=NOW + 5,
        now=NOW + 7,
        operation_id=op,
        mode="record",
    ).run(redis)
    *_, fields = await entries(redis, pk.settled, op)
    return reply, fields


async def changed_after_read(redis: Redis, op: str) -> dict[str, str]:
    """The archiver read the operation before the event: it goes back on the stream."""
    settled_at = str(await redis.hget(PartitionKeys.of(op).operation(op), "settled_at"))
    marked = await MarkArchived(
        now=NOW + 9,
        tail_ms=HOUR,
        settled_at=settled_at,
        delivery_event_at="",
        operation_id=op,
        account_id="acct-1",
    ).run(redis)
    assert marked is Marked.CHANGED
    *_, fields = await entries(redis, PartitionKeys.of(op).settled, op)
    return fields


async def test_a_settled_entry_and_a_late_event_carry_the_operations_trace_context(
    redis: Redis,
) -> None:
    op, fields = await settled_entry(redis, KEPT)
    assert fields == {JOB_FIELD: op, **KEPT}
    reply, fields = await event_after_archive(redis, op)
    assert reply == (Applied.APPLIED, "bounced", str(State.FAILED), TRACEPARENT, TRACESTATE)
    assert fields == {JOB_FIELD: op, **KEPT}
    assert await changed_after_read(redis, op) == {JOB_FIELD: op, **KEPT}


async def test_with_no_trace_context_kept_the_entries_are_as_before(redis: Redis) -> None:
    op, fields = await settled_entry(redis, {})
    assert fields == {JOB_FIELD: op}
    reply, fields = await event_after_archive(redis, op)
    assert reply == (Applied.APPLIED, "bounced", str(State.FAILED), "", "")
    assert fields == {JOB_FIELD: op}
    assert await changed_after_read(redis, op) == {JOB_FIELD: op}

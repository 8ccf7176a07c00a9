"""Every stream entry that hands an operation on carries the trace context it kept: the
archiver's entry when the operation settles (the settle prelude), and when a delivery event
reaches it after its archive (``apply_delivery``, which also hands the context back, for the
event's span link). An operation that kept none (traces off) writes its entries as before,
with no empty field."""

from __future__ import annotations

from redis.asyncio import Redis

from shared.keys import JOB_FIELD, TRACE_FIELD, PartitionKeys
from shared.model import State
from shared.scripts.attempts import Finalisation, FinaliseAttempt
from shared.scripts.observation import Applied, ApplyDelivery
from tests.core.test_transitions import ATTEMPT, HOUR, NOW, seed

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


async def settled_entry(redis: Redis, traceparent: str) -> tuple[str, dict[str, str]]:
    """An operation (keeping ``traceparent`` unless "") failed with the archive on; its id
    and the fields of the entry that hands it to the archiver."""
    op = await seed(redis, State.ATTEMPTING)
    pk = PartitionKeys.of(op)
    if traceparent:
        await redis.hset(pk.operation(op), TRACE_FIELD, traceparent)
    result = Finalisation(
        outcome="permanent",
        http_status=400,
        next_state=str(State.FAILED),
        retry_at=0,
        message_id="msg-" + op,
        observe_until=NOW + HOUR,
        reason="bad_request",
    )
    await FinaliseAttempt(
        operation_id=op, attempt_id=ATTEMPT, now=NOW, entry_id="", result=result, retention_ms=0
    ).run(redis)
    ((_, fields),) = [e for e in await redis.xrange(pk.settled) if e[1][JOB_FIELD] == op]
    return op, fields


async def event_after_archive(
    redis: Redis, op: str
) -> tuple[tuple[Applied, str, str, str], dict[str, str]]:
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
    *_, (_, fields) = [e for e in await redis.xrange(pk.settled) if e[1][JOB_FIELD] == op]
    return reply, fields


async def test_a_settled_entry_and_a_late_event_carry_the_operations_trace_context(
    redis: Redis,
) -> None:
    op, fields = await settled_entry(redis, TRACEPARENT)
    assert fields == {JOB_FIELD: op, TRACE_FIELD: TRACEPARENT}
    reply, fields = await event_after_archive(redis, op)
    assert reply == (Applied.APPLIED, "bounced", str(State.FAILED), TRACEPARENT)
    assert fields == {JOB_FIELD: op, TRACE_FIELD: TRACEPARENT}


async def test_with_no_trace_context_kept_the_entries_are_as_before(redis: Redis) -> None:
    op, fields = await settled_entry(redis, "")
    assert fields == {JOB_FIELD: op}
    reply, fields = await event_after_archive(redis, op)
    assert reply == (Applied.APPLIED, "bounced", str(State.FAILED), "")
    assert fields == {JOB_FIELD: op}

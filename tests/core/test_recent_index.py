"""The bounded indexes of recently finished operations: the script that ends an operation
failed or exhausted (or records its bounce) writes it, in the same call; nothing else gets
in; an operation the refusals guard hands back leaves; each index keeps a day and at most
RECENT_MAX entries; shared.status counts and pages them."""

from __future__ import annotations

from redis.asyncio import Redis

from shared import ids, status
from shared.keys import RECENT_KEEP_MS, RECENT_MAX, PartitionKeys
from shared.model import State
from shared.scripts.attempts import BeginAttempt, BeginCode, Finalisation, FinaliseAttempt
from shared.scripts.observation import Applied, ApplyDelivery
from tests.core.test_transitions import ATTEMPT, HOUR, NOW, seed

PK = PartitionKeys(1)


async def _finalise(redis: Redis, goal: State, now: int = NOW) -> str:
    op = await seed(redis, State.ATTEMPTING)
    result = Finalisation(
        outcome="permanent",
        http_status=400,
        next_state=str(goal),
        retry_at=now + 1000,
        message_id="msg-" + op,
        observe_until=now + HOUR,
        reason="bad_request",
    )
    await FinaliseAttempt(
        operation_id=op, attempt_id=ATTEMPT, now=now, entry_id="", result=result, retention_ms=HOUR
    ).run(redis)
    return op


async def _indexed(redis: Redis, op: str) -> float | None:
    return await redis.zscore(PK.finished, op)


async def test_failed_and_exhausted_are_indexed_by_the_ending_script_and_nothing_else(
    redis: Redis,
) -> None:
    failed = await _finalise(redis, State.FAILED)
    exhausted = await _finalise(redis, State.EXHAUSTED, NOW + 10)
    goals = (State.ACCEPTED, State.DEFERRED, State.EXPIRED, State.AMBIGUOUS)
    others = [await _finalise(redis, goal) for goal in goals]
    begun = await seed(redis, State.QUEUED)  # attempts 1 of 1: begin_attempt exhausts it
    reply = await BeginAttempt(
        operation_id=begun,
        attempt_id=ids.attempt_id(),
        now=NOW + 20,
        lease_ms=30_000,
        max_attempts=1,
        consumer="c1",
        entry_id="",
        retention_ms=HOUR,
    ).run(redis)
    assert reply.code is BeginCode.EXHAUSTED
    assert await _indexed(redis, failed) == NOW and await _indexed(redis, exhausted) == NOW + 10
    assert await _indexed(redis, begun) == NOW + 20
    assert [await _indexed(redis, op) for op in others] == [None] * 4
    rows, total = await status.recent(redis, 2, "failed", NOW + HOUR)
    assert total == 3 and [r["operation_id"] for r in rows] == [begun, exhausted, failed]
    assert [r["state"] for r in rows] == ["exhausted", "exhausted", "failed"]
    counts = await status.recent_counts(redis, 2, NOW + 2 * HOUR)
    assert counts["failed"] == {"hour": 0, "day": 3} and not counts["capped"]
    assert (await status.recent_counts(redis, 2, NOW + 30))["failed"]["hour"] == 3


async def test_a_recorded_bounce_is_indexed_and_a_delivery_is_not(redis: Redis) -> None:
    bounced = await _finalise(redis, State.ACCEPTED)
    delivered = await _finalise(redis, State.ACCEPTED)
    for op, kind in ((bounced, "bounced"), (delivered, "delivered")):
        code, *_ = await ApplyDelivery(
            message_id="msg-" + op,
            event_type=kind,
            occurred_at=NOW + 5,
            now=NOW + 7,
            operation_id=op,
            mode="record",
        ).run(redis)
        assert code is Applied.APPLIED
    rows, total = await status.recent(redis, 2, "bounced", NOW + 10)
    assert total == 1 and rows[0]["operation_id"] == bounced
    assert rows[0]["delivery"] == "bounced" and rows[0]["state"] == "accepted"
    assert (await status.recent_counts(redis, 2, NOW + 10))["bounced"] == {"hour": 1, "day": 1}


async def test_each_index_keeps_a_day_and_at_most_recent_max(redis: Redis) -> None:
    old = await _finalise(redis, State.FAILED, NOW - RECENT_KEEP_MS - 1)
    day_old = await _finalise(redis, State.FAILED, NOW - RECENT_KEEP_MS + 1)
    assert await _indexed(redis, old) is not None  # nothing newer has trimmed it yet
    rows, total = await status.recent(redis, 2, "failed", NOW)
    assert total == 1 and rows[0]["operation_id"] == day_old  # the reader skips the stale one
    fresh = await _finalise(redis, State.FAILED)
    assert await _indexed(redis, old) is None and await _indexed(redis, day_old) is not None
    filler = {f"op-1-filler-{i:05}": NOW - 1000 + i % 900 for i in range(RECENT_MAX)}
    await redis.zadd(PK.finished, filler)
    newest = await _finalise(redis, State.FAILED, NOW + 1)
    assert await redis.zcard(PK.finished) == RECENT_MAX
    assert await _indexed(redis, newest) == NOW + 1 and await _indexed(redis, fresh) == NOW
    assert await _indexed(redis, day_old) is None  # the oldest went first
    assert (await status.recent_counts(redis, 2, NOW + 1))["capped"]


async def test_pages_are_newest_first_across_partitions_without_repeats(redis: Redis) -> None:
    made = {}
    for i in range(7):
        op = ids.operation_id(i % 2, NOW)
        await redis.zadd(PartitionKeys.of(op).finished, {op: NOW - i})
        await redis.hset(PartitionKeys.of(op).operation(op), "state", "failed")
        made[op] = NOW - i
    pages = [await status.recent(redis, 2, "failed", NOW, offset=o, limit=3) for o in (0, 3, 6)]
    seen = [r["operation_id"] for rows, _ in pages for r in rows]
    assert seen == sorted(made, key=made.__getitem__, reverse=True)
    assert [len(rows) for rows, _ in pages] == [3, 3, 1] and {t for _, t in pages} == {7}

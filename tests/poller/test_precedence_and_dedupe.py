"""Out-of-order precedence and deduplication, applied by apply_delivery.lua on a real Redis.

Events arrive late, out of order and more than once; the recorded delivery must depend
only on which events happened, never on the order or the number of copies that arrived.
"""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis

from services.poller.observation import Match, apply_events, close_due, operations_for
from shared import ids
from shared.delivery import PRECEDENCE, DeliveryEvent, parse_event
from shared.keys import PartitionKeys
from shared.model import Delivery
from shared.scripts.observation import Applied, ApplyDelivery

T0 = 1_800_000_000_000
TYPES = [d for d in Delivery if d is not Delivery.UNKNOWN]


async def accepted_op(redis: Redis, message_id: str, window_end: int = T0 + 10**9) -> str:
    """An accepted operation as finalise_attempt leaves it (only the fields read here)."""
    op = ids.operation_id(1)
    pk = PartitionKeys.of(op)
    await redis.hset(
        pk.operation(op), mapping={"state": "accepted", "provider_message_id": message_id}
    )
    await redis.hset(pk.messages, message_id, op)
    await redis.zadd(pk.observe, {op: window_end})
    return op


async def apply(redis: Redis, op: str, *events: DeliveryEvent) -> list[Applied]:
    outcomes = await apply_events(redis, [Match(e, op) for e in events], now=T0 + 10_000)
    return [o.result for o in outcomes]


async def delivery(redis: Redis, op: str) -> str:
    return str(await redis.hget(PartitionKeys.of(op).operation(op), "delivery"))


def ev(kind: Delivery, at: int, message: str = "msg-1", event_id: str = "") -> DeliveryEvent:
    return DeliveryEvent(message, kind, T0 + at, event_id)


def test_lua_precedence_table_mirrors_python() -> None:
    source = ApplyDelivery.SCRIPT.source  # as rendered: the table comes from Python
    table = re.search(r"local RANK = \{([^}]*)\}", source)
    assert table is not None
    lua = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", table.group(1))}
    assert lua == {str(k): v for k, v in PRECEDENCE.items()}


async def test_late_deferred_never_overwrites_delivered(redis: Redis) -> None:
    op = await accepted_op(redis, "msg-1")
    assert await apply(redis, op, ev(Delivery.DELIVERED, 200)) == [Applied.APPLIED]
    # Reported after the delivery, but it happened before it.
    assert await apply(redis, op, ev(Delivery.DEFERRED, 100)) == [Applied.KEPT]
    assert await delivery(redis, op) == "delivered"
    raw = await redis.hgetall(PartitionKeys.of(op).operation(op))
    assert raw["delivery_event_at"] == str(T0 + 200)
    assert raw["state"] == "accepted"  # transport acceptance is never touched


async def test_deferred_then_delivered_then_complaint(redis: Redis) -> None:
    op = await accepted_op(redis, "msg-1")
    pk = PartitionKeys.of(op)
    await apply(redis, op, ev(Delivery.DEFERRED, 100))
    assert await delivery(redis, op) == "deferred"
    assert await redis.zscore(pk.observe, op) is not None, "deferred is not an outcome yet"
    await apply(redis, op, ev(Delivery.DELIVERED, 200))
    assert await redis.zscore(pk.observe, op) is None, "a definitive event ends the wait"
    await apply(redis, op, ev(Delivery.COMPLAINED, 300))
    assert await delivery(redis, op) == "complained"


async def test_copies_with_a_new_event_id_are_duplicates(redis: Redis) -> None:
    op = await accepted_op(redis, "msg-1")
    first = ev(Delivery.DELIVERED, 200, event_id="evt_a")
    copy = ev(Delivery.DELIVERED, 200, event_id="evt_b")
    assert await apply(redis, op, first, copy) == [Applied.APPLIED, Applied.DUPLICATE]
    assert await apply(redis, op, first) == [Applied.DUPLICATE]
    # Same type at another time is another event (a second deferral, say): not a copy.
    assert await apply(redis, op, ev(Delivery.DELIVERED, 199)) == [Applied.KEPT]
    assert await apply(redis, op, ev(Delivery.DELIVERED, 201)) == [Applied.APPLIED]


async def test_same_rank_later_occurrence_wins(redis: Redis) -> None:
    op = await accepted_op(redis, "msg-1")
    await apply(redis, op, ev(Delivery.BOUNCED, 300), ev(Delivery.REJECTED, 200))
    assert await delivery(redis, op) == "bounced"


async def test_event_for_an_expired_operation_drops_its_mapping(redis: Redis) -> None:
    op = await accepted_op(redis, "msg-gone")
    pk = PartitionKeys.of(op)
    await redis.delete(pk.operation(op))
    assert await apply(redis, op, ev(Delivery.DELIVERED, 1, "msg-gone")) == [Applied.MISSING]
    assert not await redis.exists(pk.operation(op)), "no hash resurrected without its TTL"
    assert await redis.hget(pk.messages, "msg-gone") is None


async def test_message_ids_are_found_across_partitions(redis: Redis) -> None:
    ops = {}
    for p in range(4):
        op = ids.operation_id(p)
        await redis.hset(PartitionKeys(p).messages, f"msg-{p}", op)
        ops[f"msg-{p}"] = op
    found = await operations_for(redis, 4, ["msg-0", "msg-3", "msg-x", "msg-0"])
    assert found == {"msg-0": ops["msg-0"], "msg-3": ops["msg-3"]}


async def test_window_closes_with_delivery_unknown(redis: Redis) -> None:
    op = await accepted_op(redis, "msg-1", window_end=T0)
    assert await close_due(redis, 1, now=T0 + 1) == 1
    raw = await redis.hgetall(PartitionKeys.of(op).operation(op))
    assert "delivery" not in raw  # still unknown: nothing is fabricated
    assert raw["observation_closed_at"] == str(T0 + 1)
    assert raw["state"] == "accepted"
    assert await redis.zscore(PartitionKeys.of(op).observe, op) is None
    assert await close_due(redis, 1, now=T0 + 2) == 0


def test_parse_event_rejects_what_it_cannot_use() -> None:
    good = {
        "event_id": "e",
        "message_id": "m",
        "type": "delivered",
        "occurred_at": "2026-01-01T00:00:00.250Z",
    }
    now = 1_767_225_600_000  # 2026-01-01T00:00:00Z
    parsed = parse_event(good, now)
    assert parsed is not None and parsed.occurred_ms % 1000 == 250
    for bad in (
        {**good, "type": "opened"},
        {**good, "occurred_at": "2026-01-01T00:00:00"},
        {**good, "message_id": ""},
        {**good, "occurred_at": 5},
        ["x"],
    ):
        assert parse_event(bad, now) is None


def test_an_event_dated_outside_any_plausible_time_is_not_used() -> None:
    """Issue 10.8: year 9999 (it would outrank every later event of its rank for ever) and
    year 1 were stored as is. Clock skew of a few minutes is still fine."""
    now = 1_767_225_600_000  # 2026-01-01T00:00:00Z
    row = {"event_id": "e", "message_id": "m", "type": "delivered"}
    for absurd in (
        "9999-12-31T23:59:59Z",
        "0001-01-01T00:00:00Z",
        "2026-01-01T00:30:00Z",
        "2024-12-01T00:00:00Z",
    ):
        assert parse_event({**row, "occurred_at": absurd}, now) is None, absurd
    for fine in ("2026-01-01T00:05:00Z", "2025-12-31T23:00:00+01:00", "2025-06-01T00:00:00Z"):
        assert parse_event({**row, "occurred_at": fine}, now) is not None, fine


async def _in_order(redis: Redis, events: list[DeliveryEvent]) -> str:
    """The delivery apply_delivery.lua records from ``events`` arriving once each, in the
    order they happened (on an operation of its own)."""
    op = await accepted_op(redis, "msg-in-order")
    for e in sorted(events, key=lambda e: e.occurred_ms):
        await apply(redis, op, e)
    return await delivery(redis, op)


happenings = st.lists(
    st.tuples(st.sampled_from(TYPES), st.integers(0, 10_000)),
    min_size=1,
    max_size=6,
    unique_by=lambda t: t[1],  # distinct times: no exact ties, so order cannot matter
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(happened=happenings, data=st.data())
async def test_any_arrival_order_and_copies_give_the_same_delivery(
    redis: Redis, happened: list[tuple[Delivery, int]], data: st.DataObject
) -> None:
    events = [ev(kind, at) for kind, at in happened]
    arrivals = data.draw(
        st.permutations(events + data.draw(st.lists(st.sampled_from(events), max_size=4)))
    )
    op = await accepted_op(redis, "msg-1")
    for arrival in arrivals:
        await apply(redis, op, arrival)
    assert await delivery(redis, op) == await _in_order(redis, events)
    assert (
        await delivery(redis, op)
        == max(events, key=lambda e: (PRECEDENCE[e.type], e.occurred_ms)).type
    )

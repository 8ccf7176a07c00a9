"""Delivery observation: the poller's reads of the store and its batches of script calls
(the requests in shared/scripts/observation.py).

Feed events name a provider message id, not an operation: :func:`operations_for` finds
the operations with one HMGET per partition in a single pipeline (each command touches one
key, so it is cluster-safe). Events are then applied one script call per operation, all of
a batch in one pipeline round trip.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from shared.delivery import DeliveryEvent
from shared.keys import PartitionKeys
from shared.redis import RedisClient
from shared.scripts.observation import Applied, ApplyDelivery, CloseObservation


@dataclass(frozen=True, slots=True)
class Match:
    event: DeliveryEvent
    operation_id: str


@dataclass(frozen=True, slots=True)
class AppliedEvent:
    match: Match
    result: Applied
    delivery: str
    state: str = ""  # the operation's state as the event found it ("" when missing)
    traceparent: str = ""  # the trace context the operation's admission kept ("" when none)
    tracestate: str = ""


async def operations_for(
    client: RedisClient, partitions: int, message_ids: Sequence[str]
) -> dict[str, str]:
    """message id -> operation id, for the ids some partition knows."""
    ids = list(dict.fromkeys(message_ids))
    if not ids:
        return {}
    pipe = client.pipeline(transaction=False)
    for partition in range(partitions):
        pipe.hmget(PartitionKeys(partition).messages, ids)
    found: dict[str, str] = {}
    for reply in await pipe.execute():
        found.update({mid: str(op) for mid, op in zip(ids, reply, strict=True) if op})
    return found


async def apply_events(
    client: RedisClient, matches: Sequence[Match], now: int, *, record: bool = False
) -> list[AppliedEvent]:
    """Apply each matched event atomically on its operation (dedupe + precedence in Lua).
    ``record``: the events were joined by operation id (pushed), so an operation without a
    provider message id takes the event's."""
    if not matches:
        return []
    mode = "record" if record else ""
    requests = [
        ApplyDelivery(
            message_id=m.event.message_id,
            event_type=str(m.event.type),
            occurred_at=m.event.occurred_ms,
            now=now,
            operation_id=m.operation_id,
            mode=mode,
        )
        for m in matches
    ]
    # Safe to run twice (dedupe on the event's identity), as Script.many may on NOSCRIPT.
    replies = await ApplyDelivery.SCRIPT.many(client, [r.call() for r in requests])
    return [
        AppliedEvent(m, *r.decode(raw))
        for m, r, raw in zip(matches, requests, replies, strict=True)
    ]


async def close_due(client: RedisClient, partition: int, now: int, batch: int = 500) -> int:
    """Close the observation windows of one partition that ended by ``now``."""
    observe = PartitionKeys(partition).observe
    due = await client.zrangebyscore(observe, "-inf", now, start=0, num=batch)
    ids = tuple(str(i) for i in due)
    if not ids:
        return 0
    return await CloseObservation(partition=partition, now=now, operation_ids=ids).run(client)


async def pending(client: RedisClient, partitions: int, now: int) -> list[int]:
    """Per partition: accepted operations still waiting for a definitive event, window open."""
    pipe = client.pipeline(transaction=False)
    for partition in range(partitions):
        pipe.zcount(PartitionKeys(partition).observe, f"({now}", "+inf")
    return [int(n) for n in await pipe.execute()]


async def forget_stale_messages(
    client: RedisClient, partition: int, cursor: int, count: int = 500
) -> tuple[int, int]:
    """One HSCAN step over a partition's message map, dropping entries whose operation is
    gone (retention ran out), so the map does not outgrow the store. (next cursor, dropped)"""
    pk = PartitionKeys(partition)
    cursor, entries = await client.hscan(pk.messages, cursor, count=count)
    if not isinstance(entries, dict) or not entries:
        return int(cursor), 0
    pairs = [(str(mid), str(op)) for mid, op in entries.items()]
    pipe = client.pipeline(transaction=False)
    for _, operation_id in pairs:
        pipe.exists(pk.operation(operation_id))
    alive = await pipe.execute()
    stale = [mid for (mid, _), exists in zip(pairs, alive, strict=True) if not exists]
    if stale:
        await client.hdel(pk.messages, *stale)
    return int(cursor), len(stale)

"""Typed wrappers over the observation scripts: what the poller calls.

Feed events name a provider message id, not an operation: :func:`operations_for` finds
the operations with one HMGET per partition in a single pipeline (each command touches one
key, so it is cluster-safe). Events are then applied one script call per operation, all of
a batch in one pipeline round trip.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from redis.asyncio import Redis, RedisCluster
from redis.exceptions import NoScriptError

from shared.delivery import DeliveryEvent
from shared.keys import POLLER_LEASE, PartitionKeys
from shared.redis import RedisClient
from shared.scripts import Script

_apply = Script("apply_delivery")
_close = Script("close_observation")
_lease = Script("lease")


class Applied(StrEnum):
    APPLIED = "applied"
    KEPT = "kept"
    DUPLICATE = "duplicate"
    MISSING = "missing"


@dataclass(frozen=True, slots=True)
class Match:
    event: DeliveryEvent
    operation_id: str


@dataclass(frozen=True, slots=True)
class Outcome:
    match: Match
    result: Applied
    delivery: str
    state: str = ""  # the operation's state as the event found it ("" when missing)


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


Call = tuple[list[str], list[str | int | float]]
_CLUSTER_CONCURRENCY = 64


async def _run_many(client: RedisClient, script: Script, calls: list[Call]) -> list[Any]:
    """Many calls of one script: one pipelined round trip on a standalone Redis; on a
    Cluster (whose pipelines refuse EVALSHA) concurrent calls, each routed by its keys."""
    if isinstance(client, RedisCluster):
        results: list[Any] = []
        for start in range(0, len(calls), _CLUSTER_CONCURRENCY):
            chunk = calls[start : start + _CLUSTER_CONCURRENCY]
            results += await asyncio.gather(*(script(client, k, a) for k, a in chunk))
        return results
    return await _pipelined(client, script, calls)


async def _pipelined(client: Redis, script: Script, calls: list[Call]) -> list[Any]:
    """NOSCRIPT -> load it and run them all again (the scripts here are idempotent, so a
    partly-run batch may safely run twice)."""
    for attempt in range(2):
        pipe = client.pipeline(transaction=False)
        for keys, args in calls:
            pipe.evalsha(script.sha, len(keys), *keys, *args)
        try:
            return list(await pipe.execute())
        except NoScriptError:
            if attempt:
                raise
            await client.script_load(script.source)
    raise AssertionError("unreachable")


async def apply_events(
    client: RedisClient, matches: Sequence[Match], now: int, *, record: bool = False
) -> list[Outcome]:
    """Apply each matched event atomically on its operation (dedupe + precedence in Lua).
    ``record``: the events were joined by operation id (pushed), so an operation without a
    provider message id takes the event's."""
    if not matches:
        return []
    mode = "record" if record else ""
    calls: list[Call] = []
    for match in matches:
        pk = PartitionKeys.of(match.operation_id)
        event = match.event
        calls.append(
            (
                [pk.operation(match.operation_id), pk.observe, pk.messages],
                [
                    event.message_id,
                    str(event.type),
                    event.occurred_ms,
                    now,
                    match.operation_id,
                    mode,
                ],
            )
        )
    replies = await _run_many(client, _apply, calls)
    return [Outcome(m, Applied(r[0]), str(r[1]), str(r[2]))
            for m, r in zip(matches, replies, strict=True)]  # fmt: skip


async def close_due(client: RedisClient, partition: int, now: int, batch: int = 500) -> int:
    """Close the observation windows of one partition that ended by ``now``."""
    pk = PartitionKeys(partition)
    ids = [str(i) for i in await client.zrangebyscore(pk.observe, "-inf", now, start=0, num=batch)]
    if not ids:
        return 0
    return int(await _close(client, [pk.observe, *(pk.operation(i) for i in ids)], [now, *ids]))


async def pending(client: RedisClient, partitions: int, now: int) -> list[int]:
    """Per partition: accepted operations still waiting for a definitive event, window open."""
    pipe = client.pipeline(transaction=False)
    for partition in range(partitions):
        pipe.zcount(PartitionKeys(partition).observe, f"({now}", "+inf")
    return [int(n) for n in await pipe.execute()]


async def hold_lease(client: RedisClient, holder: str, lease_ms: int) -> bool:
    """Take or renew the single-poller lease; True while ``holder`` has it."""
    return bool(int(await _lease(client, [POLLER_LEASE], [holder, lease_ms, ""])))


async def release_lease(client: RedisClient, holder: str) -> None:
    await _lease(client, [POLLER_LEASE], [holder, 0, "release"])


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

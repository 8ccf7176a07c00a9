"""The operation store's plain reads, and the script calls that do more than send one
request: what the sender, poller and CLI share.

A script is called through its request (shared/scripts/: ``await Request(...).run(client)``);
what is here reads first (the due set), skips an empty batch, or reads stored rows back.
"""

from __future__ import annotations

from shared.keys import PartitionKeys
from shared.model import Attempt, Operation
from shared.redis import RedisClient
from shared.scripts.jobs import HandBack, PromoteDue, RenewEntries


async def promote_due(client: RedisClient, partition: int, now: int, batch: int = 200) -> int:
    """Move due operations of one partition back to its send stream; returns how many."""
    ids = await client.zrangebyscore(PartitionKeys(partition).due, "-inf", now, start=0, num=batch)
    if not ids:
        return 0
    op_ids = tuple(str(i) for i in ids)
    return await PromoteDue(partition=partition, now=now, operation_ids=op_ids).run(client)


async def hand_back(
    client: RedisClient, partition: int, consumer: str, entry_ids: list[str]
) -> int:
    """Give never-started send jobs back to the group (see hand_back.lua)."""
    return await _held(HandBack, client, partition, consumer, entry_ids)


async def renew_entries(
    client: RedisClient, partition: int, consumer: str, entry_ids: list[str]
) -> int:
    """Keep send jobs this consumer still holds from being taken over (see renew_entries.lua)."""
    return await _held(RenewEntries, client, partition, consumer, entry_ids)


async def _held(
    request: type[HandBack | RenewEntries],
    client: RedisClient,
    partition: int,
    consumer: str,
    entry_ids: list[str],
) -> int:
    """One script call about the send jobs ``consumer`` holds; an empty batch calls nothing."""
    if not entry_ids:
        return 0
    held = request(partition=partition, consumer=consumer, entry_ids=tuple(entry_ids))
    return await held.run(client)


async def load_operation(client: RedisClient, operation_id: str) -> Operation | None:
    raw = await client.hgetall(PartitionKeys.of(operation_id).operation(operation_id))
    if not raw:
        return None
    return Operation.from_hash(operation_id, {str(k): str(v) for k, v in raw.items()})


async def load_attempts(client: RedisClient, operation_id: str) -> list[Attempt]:
    rows = await client.lrange(PartitionKeys.of(operation_id).attempts(operation_id), 0, -1)
    return [Attempt.decode(row, number) for number, row in enumerate(rows, 1)]

"""Typed wrappers over the operation scripts: what the sender, poller and CLI call.

Each function passes every key through KEYS (built by shared.keys) and decodes the
script's reply into a small dataclass or enum, so no caller parses Lua tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from shared.keys import SEND_GROUP, PartitionKeys
from shared.model import Attempt, Operation
from shared.redis import RedisClient
from shared.scripts import Script

_begin = Script("begin_attempt")
_finalise = Script("finalise_attempt")
_promote = Script("promote_due")
_resolve = Script("resolve_ambiguous")
_hand_back = Script("hand_back")
_hold = Script("hold")


class BeginCode(StrEnum):
    BEGIN = "begin"
    BUSY = "busy"
    SKIP = "skip"
    AMBIGUOUS = "ambiguous"
    EXPIRED = "expired"
    EXHAUSTED = "exhausted"
    MISSING = "missing"


@dataclass(frozen=True, slots=True)
class Begun:
    code: BeginCode
    attempts: int = 0
    account_id: str = ""
    token_kid: str = ""
    template_revision: str = ""
    horizon_at: int = 0
    detail: str = ""


def keys_for(operation_id: str) -> PartitionKeys:
    return PartitionKeys.of(operation_id)


async def begin_attempt(
    client: RedisClient,
    operation_id: str,
    *,
    attempt_id: str,
    now: int,
    lease_ms: int,
    max_attempts: int,
    consumer: str,
    entry_id: str,
    retention_ms: int,
    provider: str = "",
) -> Begun:
    pk = keys_for(operation_id)
    keys = [pk.operation(operation_id), pk.attempts(operation_id), pk.send, pk.ambiguous, pk.live]
    args: list[str | int | float] = [now, attempt_id, lease_ms, max_attempts, consumer, entry_id,
                                     retention_ms, operation_id, provider]  # fmt: skip
    reply = await _begin(client, keys, args)
    code = BeginCode(reply[0])
    if code is BeginCode.BEGIN:
        return Begun(code, int(reply[1]), reply[2], reply[3], reply[4], int(reply[5]))
    return Begun(code, detail=str(reply[1]) if len(reply) > 1 else "")


@dataclass(frozen=True, slots=True)
class Finalisation:
    """What one attempt ended as, decided in Python (sender.policy) before the script runs."""

    outcome: str
    http_status: int
    next_state: str
    retry_at: int = 0
    reason: str = ""
    retry_after_source: str = ""
    message_id: str = ""
    observe_until: int = 0
    refund: bool = False
    decision: str = ""


async def finalise_attempt(
    client: RedisClient,
    operation_id: str,
    *,
    attempt_id: str,
    now: int,
    entry_id: str,
    result: Finalisation,
    retention_ms: int,
) -> bool:
    """Apply ``result``; False when fenced (the lease was lost and someone else owns it)."""
    pk = keys_for(operation_id)
    reply = await _finalise(
        client,
        [
            pk.operation(operation_id),
            pk.attempts(operation_id),
            pk.send,
            pk.due,
            pk.ambiguous,
            pk.live,
            pk.messages,
            pk.observe,
        ],
        [
            attempt_id,
            now,
            entry_id,
            result.outcome,
            result.http_status,
            result.next_state,
            result.retry_at,
            result.reason,
            result.retry_after_source,
            result.message_id,
            result.observe_until,
            "1" if result.refund else "0",
            retention_ms,
            result.decision,
            operation_id,
        ],
    )
    return bool(reply[0] == "ok")


async def promote_due(client: RedisClient, partition: int, now: int, batch: int = 200) -> int:
    """Move due operations of one partition back to its send stream; returns how many."""
    pk = PartitionKeys(partition)
    ids = await client.zrangebyscore(pk.due, "-inf", now, start=0, num=batch)
    if not ids:
        return 0
    op_ids = [str(i) for i in ids]
    moved = await _promote(
        client, [pk.due, pk.send, *(pk.operation(i) for i in op_ids)], [now, *op_ids]
    )
    return int(moved)


async def hand_back(
    client: RedisClient, partition: int, consumer: str, entry_ids: list[str]
) -> int:
    """Give never-started send jobs back to the group (see hand_back.lua)."""
    if not entry_ids:
        return 0
    stream = PartitionKeys(partition).send
    return int(await _hand_back(client, [stream], [SEND_GROUP, consumer, *entry_ids]))


async def resolve_ambiguous(
    client: RedisClient,
    operation_id: str,
    *,
    now: int,
    decision: str,
    message_id: str,
    observe_until: int,
    reason: str,
    retention_ms: int,
) -> tuple[bool, str]:
    """Settle an ambiguous operation: accepted, replay (same id and key) or review."""
    pk = keys_for(operation_id)
    reply = await _resolve(
        client,
        [
            pk.operation(operation_id),
            pk.attempts(operation_id),
            pk.send,
            pk.ambiguous,
            pk.review,
            pk.live,
            pk.messages,
            pk.observe,
        ],
        [now, decision, message_id, observe_until, reason, retention_ms, operation_id],
    )
    return reply[0] == "ok", str(reply[1])


async def hold(
    client: RedisClient, operation_id: str, action: str, *, now: int, reason: str
) -> tuple[bool, str]:
    """Quarantine or release one operation; (done, previous state or refusing state)."""
    pk = keys_for(operation_id)
    reply = await _hold(
        client,
        [pk.operation(operation_id), pk.send, pk.due, pk.ambiguous, pk.review],
        [action, now, reason[:200], operation_id],
    )
    return reply[0] == "ok", str(reply[1])


async def load_operation(client: RedisClient, operation_id: str) -> Operation | None:
    raw = await client.hgetall(keys_for(operation_id).operation(operation_id))
    if not raw:
        return None
    return Operation.from_hash(operation_id, {str(k): str(v) for k, v in raw.items()})


async def load_attempts(client: RedisClient, operation_id: str) -> list[Attempt]:
    rows = await client.lrange(keys_for(operation_id).attempts(operation_id), 0, -1)
    return [Attempt.decode(row, number) for number, row in enumerate(rows, 1)]

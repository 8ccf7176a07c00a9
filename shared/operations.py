"""Typed wrappers over the operation scripts: what the sender, poller and CLI call.

Each script call is a typed request (shared.scripts.Request: its KEYS, built by shared.keys,
and its ARGV, by name) whose reply is decoded into a small dataclass or enum, so no caller
parses Lua tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from shared.keys import PartitionKeys
from shared.model import Attempt, Operation
from shared.redis import RedisClient
from shared.scripts import Request, Script, key


class BeginCode(StrEnum):
    BEGIN = "begin"
    BUSY = "busy"
    SKIP = "skip"
    AMBIGUOUS = "ambiguous"
    EXPIRED = "expired"
    EXHAUSTED = "exhausted"
    MISSING = "missing"
    ELSEWHERE = "elsewhere"  # pinned to another provider (detail: its name); nothing written


@dataclass(frozen=True, slots=True)
class Begun:
    code: BeginCode
    attempts: int = 0
    account_id: str = ""
    token_kid: str = ""
    template_revision: str = ""
    horizon_at: int = 0
    detail: str = ""
    token_expires_at: int = 0  # what the link's expiry tells the player


def keys_for(operation_id: str) -> PartitionKeys:
    return PartitionKeys.of(operation_id)


@dataclass(slots=True, kw_only=True)
class BeginAttempt(Request[Begun]):
    SCRIPT = Script("begin_attempt")
    CODES = BeginCode

    operation: str = key()
    ledger: str = key()
    send: str = key()
    ambiguous: str = key()
    live: str = key()
    now: int
    attempt_id: str
    lease_ms: int
    max_attempts: int
    consumer: str
    entry_id: str
    retention_ms: int
    operation_id: str
    provider: str

    def decode(self, raw: Any) -> Begun:
        code = BeginCode(raw[0])
        if code is BeginCode.BEGIN:
            return Begun(code, int(raw[1]), raw[2], raw[3], raw[4], int(raw[5]),
                         token_expires_at=int(raw[6]))  # fmt: skip
        return Begun(code, detail=str(raw[1]) if len(raw) > 1 else "")


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
    return await BeginAttempt(
        operation=pk.operation(operation_id), ledger=pk.attempts(operation_id), send=pk.send,
        ambiguous=pk.ambiguous, live=pk.live, now=now, attempt_id=attempt_id,
        lease_ms=lease_ms, max_attempts=max_attempts, consumer=consumer, entry_id=entry_id,
        retention_ms=retention_ms, operation_id=operation_id, provider=provider,
    ).run(client)  # fmt: skip


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
    template_revision: str = ""  # what the attempt sent (shared.emails), for the ledger


class FinaliseCode(StrEnum):
    OK = "ok"
    FENCED = "fenced"  # the lease was lost: someone else owns the operation, nothing written


@dataclass(slots=True, kw_only=True)
class FinaliseAttempt(Request[FinaliseCode]):
    SCRIPT = Script("finalise_attempt")
    CODES = FinaliseCode

    operation: str = key()
    ledger: str = key()
    send: str = key()
    due: str = key()
    ambiguous: str = key()
    live: str = key()
    messages: str = key()
    observe: str = key()
    attempt_id: str
    now: int
    entry_id: str
    outcome: str
    http_status: int
    next_state: str
    retry_at: int
    reason: str
    retry_after_source: str
    message_id: str
    observe_until: int
    refund: bool
    retention_ms: int
    decision: str
    operation_id: str
    template: str

    def decode(self, raw: Any) -> FinaliseCode:
        return FinaliseCode(raw[0])


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
    code = await FinaliseAttempt(
        operation=pk.operation(operation_id), ledger=pk.attempts(operation_id), send=pk.send,
        due=pk.due, ambiguous=pk.ambiguous, live=pk.live, messages=pk.messages,
        observe=pk.observe, attempt_id=attempt_id, now=now, entry_id=entry_id,
        outcome=result.outcome, http_status=result.http_status, next_state=result.next_state,
        retry_at=result.retry_at, reason=result.reason,
        retry_after_source=result.retry_after_source, message_id=result.message_id,
        observe_until=result.observe_until, refund=result.refund, retention_ms=retention_ms,
        decision=result.decision, operation_id=operation_id, template=result.template_revision,
    ).run(client)  # fmt: skip
    return code is FinaliseCode.OK


@dataclass(slots=True, kw_only=True)
class PromoteDue(Request[int]):
    SCRIPT = Script("promote_due")

    due: str = key()
    send: str = key()
    operations: tuple[str, ...] = key()
    now: int
    operation_ids: tuple[str, ...]

    def decode(self, raw: Any) -> int:
        return int(raw)  # how many were moved to the send stream


async def promote_due(client: RedisClient, partition: int, now: int, batch: int = 200) -> int:
    """Move due operations of one partition back to its send stream; returns how many."""
    pk = PartitionKeys(partition)
    ids = await client.zrangebyscore(pk.due, "-inf", now, start=0, num=batch)
    if not ids:
        return 0
    op_ids = tuple(str(i) for i in ids)
    return await PromoteDue(
        due=pk.due, send=pk.send, operations=tuple(pk.operation(i) for i in op_ids), now=now,
        operation_ids=op_ids,
    ).run(client)  # fmt: skip


@dataclass(slots=True, kw_only=True)
class HandBack(Request[int]):
    SCRIPT = Script("hand_back")

    send: str = key()
    consumer: str
    entry_ids: tuple[str, ...]

    def decode(self, raw: Any) -> int:
        return int(raw)  # how many entries were handed back


async def hand_back(
    client: RedisClient, partition: int, consumer: str, entry_ids: list[str]
) -> int:
    """Give never-started send jobs back to the group (see hand_back.lua)."""
    if not entry_ids:
        return 0
    send = PartitionKeys(partition).send
    return await HandBack(send=send, consumer=consumer, entry_ids=tuple(entry_ids)).run(client)


@dataclass(slots=True, kw_only=True)
class RenewEntries(Request[int]):
    SCRIPT = Script("renew_entries")

    send: str = key()
    consumer: str
    entry_ids: tuple[str, ...]

    def decode(self, raw: Any) -> int:
        return int(raw)  # how many entries were renewed


async def renew_entries(
    client: RedisClient, partition: int, consumer: str, entry_ids: list[str]
) -> int:
    """Keep send jobs this consumer still holds from being taken over (see renew_entries.lua)."""
    if not entry_ids:
        return 0
    send = PartitionKeys(partition).send
    return await RenewEntries(send=send, consumer=consumer, entry_ids=tuple(entry_ids)).run(client)


class Settled(StrEnum):
    """resolve_ambiguous.lua's reply codes."""

    OK = "ok"
    STALE = "stale"  # the operation is no longer ambiguous: nothing written


@dataclass(slots=True, kw_only=True)
class ResolveAmbiguous(Request[tuple[Settled, str]]):
    SCRIPT = Script("resolve_ambiguous")
    CODES = Settled

    operation: str = key()
    ledger: str = key()
    send: str = key()
    ambiguous: str = key()
    review: str = key()
    live: str = key()
    messages: str = key()
    observe: str = key()
    now: int
    decision: str
    message_id: str
    observe_until: int
    reason: str
    retention_ms: int
    operation_id: str
    pin: str
    pin_for: str

    def decode(self, raw: Any) -> tuple[Settled, str]:
        return Settled(raw[0]), str(raw[1])


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
    pin: str = "",
    pin_for: str = "replay",
) -> tuple[bool, str]:
    """Settle an ambiguous operation: accepted, replay (same id and key) or review. A replay
    with ``pin`` is sent only through that provider (``pin_for``: resolve_ambiguous.lua)."""
    pk = keys_for(operation_id)
    code, state = await ResolveAmbiguous(
        operation=pk.operation(operation_id), ledger=pk.attempts(operation_id), send=pk.send,
        ambiguous=pk.ambiguous, review=pk.review, live=pk.live, messages=pk.messages,
        observe=pk.observe, now=now, decision=decision, message_id=message_id,
        observe_until=observe_until, reason=reason, retention_ms=retention_ms,
        operation_id=operation_id, pin=pin, pin_for=pin_for,
    ).run(client)  # fmt: skip
    return code is Settled.OK, state


class HoldCode(StrEnum):
    """hold.lua's reply codes."""

    OK = "ok"
    REFUSED = "refused"  # the state does not allow it (or the operation is missing)


@dataclass(slots=True, kw_only=True)
class Hold(Request[tuple[HoldCode, str]]):
    SCRIPT = Script("hold")
    CODES = HoldCode

    operation: str = key()
    send: str = key()
    due: str = key()
    ambiguous: str = key()
    review: str = key()
    action: str
    now: int
    reason: str
    operation_id: str

    def decode(self, raw: Any) -> tuple[HoldCode, str]:
        return HoldCode(raw[0]), str(raw[1])


async def hold(
    client: RedisClient, operation_id: str, action: str, *, now: int, reason: str
) -> tuple[bool, str]:
    """Quarantine or release one operation; (done, previous state or refusing state)."""
    pk = keys_for(operation_id)
    code, state = await Hold(
        operation=pk.operation(operation_id), send=pk.send, due=pk.due,
        ambiguous=pk.ambiguous, review=pk.review, action=action, now=now,
        reason=reason[:200], operation_id=operation_id,
    ).run(client)  # fmt: skip
    return code is HoldCode.OK, state


@dataclass(slots=True, kw_only=True)
class RequeueRefused(Request[tuple[HoldCode, str]]):
    SCRIPT = Script("requeue_refused")
    CODES = HoldCode

    operation: str = key()
    ledger: str = key()
    account: str = key()
    send: str = key()
    live: str = key()
    now: int
    reason: str
    note: str
    operation_id: str

    def decode(self, raw: Any) -> tuple[HoldCode, str]:
        return HoldCode(raw[0]), str(raw[1]) if len(raw) > 1 else ""


async def requeue_refused(
    client: RedisClient, operation_id: str, account_id: str, *, now: int, reason: str,
    note: str,
) -> tuple[bool, str]:  # fmt: skip
    """Hand a failed operation the refusals guard counted back to the queue (refunded);
    (done, why not)."""
    pk = keys_for(operation_id)
    code, why = await RequeueRefused(
        operation=pk.operation(operation_id), ledger=pk.attempts(operation_id),
        account=pk.account(account_id), send=pk.send, live=pk.live, now=now, reason=reason,
        note=note[:200], operation_id=operation_id,
    ).run(client)  # fmt: skip
    return code is HoldCode.OK, why


async def load_operation(client: RedisClient, operation_id: str) -> Operation | None:
    raw = await client.hgetall(keys_for(operation_id).operation(operation_id))
    if not raw:
        return None
    return Operation.from_hash(operation_id, {str(k): str(v) for k, v in raw.items()})


async def load_attempts(client: RedisClient, operation_id: str) -> list[Attempt]:
    rows = await client.lrange(keys_for(operation_id).attempts(operation_id), 0, -1)
    return [Attempt.decode(row, number) for number, row in enumerate(rows, 1)]

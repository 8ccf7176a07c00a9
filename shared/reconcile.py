"""Reconciliation of ambiguous attempts: ask the provider before anything is replayed.

An attempt is ambiguous when the request may have reached the provider but no answer did
(a timeout or a dropped connection after the write, or a sender that died mid-attempt).
The provider is asked by idempotency key (= operation id):
found -> accepted with the provider's message id; not found and still inside the
idempotency window -> one replay with the same id, key and token; otherwise (or with
``RESETGATE_AMBIGUOUS_POLICY=review``) -> held for a person. Nothing here mints a token.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum

from shared import clock, metrics
from shared.keys import PartitionKeys
from shared.logging import event
from shared.operations import load_operation, resolve_ambiguous
from shared.provider import HttpProvider, ProviderUnavailable
from shared.redis import RedisClient
from shared.settings import PolicySettings

log = logging.getLogger(__name__)


class Resolution(StrEnum):
    ACCEPTED = "accepted"
    REPLAY = "replay"
    REVIEW = "review"


@dataclass(frozen=True, slots=True)
class LookupThrottled(Exception):
    retry_after: str | None
    server_date: str | None


def _found_message_id(body: dict[str, object], idempotency_key: str) -> str:
    """The id of the row sent with exactly our key: a row for another key (a provider that
    matches loosely, or a proxy's cache) would mark our operation accepted for someone else's
    email."""
    data = body.get("data")
    if not isinstance(data, list):
        raise ProviderUnavailable("lookup answered without a data list")
    for row in data:
        if not isinstance(row, dict) or row.get("idempotency_key") != idempotency_key:
            continue
        if isinstance(row.get("id"), str) and row["id"]:
            return str(row["id"])
    return ""


async def lookup(provider: HttpProvider, operation_id: str) -> str:
    """The provider's message id for this key, or "" if it never accepted one."""
    result = await provider.lookup(operation_id)
    metrics.poll_requests.labels("lookup", str(result.status)).inc()
    if result.status == 429:
        metrics.poll_throttled.labels("lookup").inc()
        raise LookupThrottled(result.retry_after, result.server_date)
    if result.status != 200:
        raise ProviderUnavailable(f"lookup answered {result.status}")
    return _found_message_id(result.body, operation_id)


async def reconcile(
    client: RedisClient, provider: HttpProvider, settings: PolicySettings, operation_id: str
) -> Resolution | None:
    """Settle one ambiguous operation; None when it was no longer ambiguous."""
    operation = await load_operation(client, operation_id)
    if operation is None or operation.state != "ambiguous":
        await client.zrem(PartitionKeys.of(operation_id).ambiguous, operation_id)
        return None
    message_id = await lookup(provider, operation_id)
    now = clock.now_ms()
    if message_id:
        decision, reason = Resolution.ACCEPTED, "reconciled: provider had accepted it"
    elif settings.ambiguous_policy == "review":
        decision, reason = Resolution.REVIEW, "reconciled: not found; policy is review"
    elif operation.replays >= 1 or now >= operation.horizon_at:
        decision, reason = Resolution.REVIEW, "reconciled: not found; replay spent or too late"
    else:
        decision, reason = Resolution.REPLAY, "reconciled: not found; one replay, same key"
    applied, _ = await resolve_ambiguous(
        client,
        operation_id,
        now=now,
        decision=decision,
        message_id=message_id,
        observe_until=now + settings.observation_window_seconds * 1000,
        reason=reason,
        retention_ms=settings.retention_seconds * 1000,
    )
    if not applied:
        return None
    metrics.reconciliations.labels(decision.value if decision != "replay" else "replayed").inc()
    ambiguous_at = int(
        await client.hget(PartitionKeys.of(operation_id).operation(operation_id), "ambiguous_at")
        or now
    )
    metrics.reconciliation_lag.observe(max(0, now - ambiguous_at) / 1000)
    event(
        log,
        logging.INFO,
        "ambiguous attempt reconciled",
        operation_id=operation_id,
        decision=str(decision),
    )
    return decision


async def due_ambiguous(
    client: RedisClient, partition: int, *, older_than_ms: int, limit: int = 100
) -> list[str]:
    """Ambiguous operations of a partition that have waited at least ``older_than_ms``."""
    cutoff = clock.now_ms() - older_than_ms
    ids = await client.zrangebyscore(
        PartitionKeys(partition).ambiguous, "-inf", cutoff, start=0, num=limit
    )
    return [str(i) for i in ids]

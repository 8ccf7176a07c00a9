"""Pushed events through the shared observation path, on a real Redis.

Joined by operation id; applied once however often they are replayed; never allowed to
fabricate or outrank what happened (precedence lives in apply_delivery.lua, shared with the
pull feed); an ambiguous attempt is settled by the event that proves the provider had the
message; unknown operations and absurd dates are counted and dropped, never stored.
"""

from __future__ import annotations

import time

from redis.asyncio import Redis

from services.poller.inbound import sendgrid
from services.poller.inbound.events import Acceptance, Drop, Parsed, ProviderEvent
from services.poller.inbound.ingest import Ingest
from shared import clock, codec, ids
from shared.delivery import MAX_CLOCK_SKEW_MS
from shared.keys import PREFIX, PartitionKeys
from shared.model import Delivery
from shared.operations import load_operation
from shared.scripts.attempts import (
    Finalisation,
    FinaliseAttempt,
    FinaliseCode,
    ResolveAmbiguous,
    Settled,
)
from shared.settings import PolicySettings
from tests.inbound.providers import sendgrid_event


async def operation(redis: Redis, state: str = "accepted", message_id: str = "") -> str:
    """An operation hash as the sender leaves it (the fields the observation path reads)."""
    op = ids.operation_id(2)
    pk = PartitionKeys.of(op)
    await redis.hset(
        pk.operation(op),
        mapping={
            "operation_id": op,
            "account_id": "acct-x",
            "partition": 2,
            "state": state,
            "created_at": clock.now_ms() - 60_000,
            "token_expires_at": clock.now_ms() + 3_600_000,
            "horizon_at": clock.now_ms() + 3_000_000,
            "delivery": "unknown",
            "provider_message_id": message_id,
        },
    )
    await redis.pexpire(pk.operation(op), 3_600_000)
    if state == "accepted":
        await redis.zadd(pk.observe, {op: clock.now_ms() + 3_600_000})
    if state == "ambiguous":
        await redis.zadd(pk.ambiguous, {op: clock.now_ms() - 1000})
    return op


def event(
    op: str, meaning: Delivery | Acceptance, at_ms: int | None = None, message_id: str = "msg-1"
) -> ProviderEvent:
    when = clock.now_ms() - 1000 if at_ms is None else at_ms
    return ProviderEvent("sendgrid", "delivered", op, message_id, meaning, when)


async def test_joined_by_operation_id_and_message_id_recorded(
    redis: Redis, settings: PolicySettings
) -> None:
    op = await operation(redis)
    result = await Ingest(redis, settings).apply(
        "sendgrid", Parsed([event(op, Delivery.DELIVERED)])
    )
    assert result.tally.applied == 1
    view = await load_operation(redis, op)
    assert view is not None and view.delivery == "delivered"
    assert view.provider_message_id == "msg-1", "the event's message id, since it had none"
    assert await redis.hget(PartitionKeys.of(op).messages, "msg-1") == op
    assert await redis.zscore(PartitionKeys.of(op).observe, op) is None, "definitive: window ends"


async def test_existing_message_id_is_kept(redis: Redis, settings: PolicySettings) -> None:
    op = await operation(redis, message_id="from-the-send")
    await Ingest(redis, settings).apply("sendgrid", Parsed([event(op, Delivery.DEFERRED)]))
    view = await load_operation(redis, op)
    assert view is not None and view.provider_message_id == "from-the-send"
    assert view.delivery == "deferred" and view.state == "accepted"


async def test_replayed_batch_is_applied_once(redis: Redis, settings: PolicySettings) -> None:
    op = await operation(redis)
    at = time.time() - 5
    body = codec.dumps([sendgrid_event(op, "msgA", "delivered", at)])
    ingest = Ingest(redis, settings)
    first = await ingest.apply("sendgrid", sendgrid.parse(body))
    again = await ingest.apply("sendgrid", sendgrid.parse(body))
    assert (first.tally.applied, again.tally.applied, again.tally.duplicate) == (1, 0, 1)
    observed = await redis.hget(PartitionKeys.of(op).operation(op), "delivery_observed_at")
    late = await ingest.apply(
        "sendgrid", sendgrid.parse(codec.dumps([sendgrid_event(op, "msgA", "deferred", at - 1)]))
    )
    assert late.tally.kept == 1, "a late deferred never hides delivered"
    assert await redis.hget(PartitionKeys.of(op).operation(op), "delivery_observed_at") == observed


async def test_ambiguous_attempt_is_settled_by_a_proving_event(
    redis: Redis, settings: PolicySettings
) -> None:
    op = await operation(redis, state="ambiguous")
    other = await operation(redis, state="ambiguous")
    ingest = Ingest(redis, settings)
    result = await ingest.apply(
        "sendgrid",
        Parsed(
            [
                event(op, Delivery.BOUNCED, message_id="m-op"),
                event(
                    other, Acceptance.ACCEPTED, message_id="m-other"
                ),  # "processed" proves it too
            ]
        ),
    )
    assert (result.settled, result.tally.applied, result.acceptances) == (2, 1, 1)
    first, second = await load_operation(redis, op), await load_operation(redis, other)
    assert first is not None and second is not None
    assert (first.state, first.delivery, first.provider_message_id) == (
        "accepted",
        "bounced",
        "m-op",
    )
    assert (second.state, second.delivery) == ("accepted", "unknown"), "acceptance is not delivery"
    assert await redis.zscore(PartitionKeys.of(other).observe, other) is not None, "window opens"
    assert await redis.zscore(PartitionKeys.of(op).ambiguous, op) is None


async def test_unknown_operations_and_absurd_dates_are_dropped(
    redis: Redis, settings: PolicySettings
) -> None:
    op = await operation(redis)
    now = clock.now_ms()
    result = await Ingest(redis, settings).apply(
        "sendgrid",
        Parsed(
            [
                event("op-9-NOPE", Delivery.DELIVERED),  # partition 9 of 4
                event("not-an-id", Delivery.DELIVERED),
                event(ids.operation_id(1), Delivery.DELIVERED),  # well formed, no such operation
                event(op, Delivery.DELIVERED, at_ms=now + MAX_CLOCK_SKEW_MS + 60_000),
                event(op, Delivery.DELIVERED, at_ms=0),  # 1970: before the operation existed
            ]
        ),
    )
    assert result.dropped == {Drop.UNKNOWN_OPERATION: 3, Drop.OUT_OF_RANGE: 2}
    view = await load_operation(redis, op)
    assert view is not None and view.delivery == "unknown" and not view.delivery_observed_at
    keys = {k async for k in redis.scan_iter(f"{PREFIX}:*")}
    assert not any("NOPE" in k or "not-an-id" in k for k in keys), "no key minted for junk"


async def attempting(redis: Redis) -> str:
    """An attempt in flight: what begin_attempt leaves before the provider has answered."""
    op = await operation(redis, state="attempting")
    await redis.hset(PartitionKeys.of(op).operation(op), "attempt_id", "att-1")
    return op


ACCEPTED = Finalisation(
    "accepted", 202, "accepted", message_id="msg-1", observe_until=clock.now_ms() + 3_600_000
)


async def finalise(redis: Redis, op: str, result: Finalisation) -> FinaliseCode:
    """The sender's finalise of the attempt :func:`attempting` left in flight."""
    return await FinaliseAttempt(
        operation_id=op,
        attempt_id="att-1",
        now=clock.now_ms(),
        entry_id="",
        result=result,
        retention_ms=3_600_000,
    ).run(redis)


async def test_event_during_attempt_does_not_reopen_the_window(
    redis: Redis, settings: PolicySettings
) -> None:
    """A webhook can beat the sender's finalise: the delivered event it recorded while the
    attempt was in flight has already ended the wait, so acceptance must not open it again
    (the window would later close on a delivered operation)."""
    op = await attempting(redis)
    result = await Ingest(redis, settings).apply(
        "sendgrid", Parsed([event(op, Delivery.DELIVERED)])
    )
    assert result.tally.applied == 1
    done = await finalise(redis, op, ACCEPTED)
    assert done is FinaliseCode.OK
    view = await load_operation(redis, op)
    assert view is not None and (view.state, view.delivery) == ("accepted", "delivered")
    assert await redis.zscore(PartitionKeys.of(op).observe, op) is None


async def test_deferred_during_attempt_still_opens_the_window(
    redis: Redis, settings: PolicySettings
) -> None:
    op = await attempting(redis)
    await Ingest(redis, settings).apply("sendgrid", Parsed([event(op, Delivery.DEFERRED)]))
    await finalise(redis, op, ACCEPTED)
    assert await redis.zscore(PartitionKeys.of(op).observe, op) == ACCEPTED.observe_until


async def test_event_before_a_reconciled_acceptance_does_not_reopen_the_window(
    redis: Redis, settings: PolicySettings
) -> None:
    op = await attempting(redis)
    await Ingest(redis, settings).apply("sendgrid", Parsed([event(op, Delivery.BOUNCED)]))
    ambiguous = Finalisation("timeout", 0, "ambiguous")
    await finalise(redis, op, ambiguous)
    applied, _ = await ResolveAmbiguous(
        operation_id=op,
        now=clock.now_ms(),
        decision="accepted",
        message_id="msg-1",
        observe_until=clock.now_ms() + 3_600_000,
        reason="looked up",
        retention_ms=3_600_000,
    ).run(redis)
    assert applied is Settled.OK
    view = await load_operation(redis, op)
    assert view is not None and (view.state, view.delivery) == ("accepted", "bounced")
    assert await redis.zscore(PartitionKeys.of(op).observe, op) is None

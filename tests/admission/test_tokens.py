"""Reset tokens through the internal API: single use, expiry, supersession, rotation."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from shared import clock
from shared.keys import PartitionKeys, partition_of
from shared.tokens import parse_keys
from tests.admission.helpers import (
    ALICE,
    BOB,
    admission_settings,
    consume,
    internal_admit,
    seed_directory,
    serving,
)
from tests.conftest import TEST_TOKEN_KEYS

KEYS = parse_keys(TEST_TOKEN_KEYS)
K1_ONLY = "k1:first-secret-0123456789abcdef"
ROTATED = "k3:third-secret-0123456789abcdef," + TEST_TOKEN_KEYS  # k3 current, k2 and k1 older


async def new_operation(http: TestClient[Any, Any], account_id: str) -> str:
    reply = await internal_admit(http, account_id)
    assert reply.status in (200, 201)
    operation_id: str = (await reply.json())["operation_id"]
    return operation_id


async def reason(reply: Any) -> tuple[int, str]:
    body = await reply.json()
    assert set(body) == {"error", "message"}
    return reply.status, body["error"]


async def test_a_token_is_valid_once_and_closes_the_live_operation(
    api: TestClient[Any, Any], redis: Redis
) -> None:
    op = await new_operation(api, ALICE[1].account_id)
    first = await consume(api, op, KEYS.derive(op))
    assert first.status == 200
    assert await first.json() == {
        "status": "consumed",
        "operation_id": op,
        "account_id": ALICE[1].account_id,
    }
    assert await reason(await consume(api, op, KEYS.derive(op))) == (409, "token_used")
    pk = PartitionKeys(partition_of(ALICE[1].account_id, 4))
    # The account's last operation is terminal now, so the account has no live one.
    assert await redis.hget(pk.account(ALICE[1].account_id), "last") == op
    assert await redis.zscore(pk.live, op) is None
    # Never attempted (queued), so not accepted: closed as expired (docs/architecture.md).
    assert await redis.hmget(pk.operation(op), ["state", "reason"]) == [
        "expired",
        "token_consumed",
    ]


async def test_wrong_and_foreign_tokens_are_refused_and_change_nothing(
    api: TestClient[Any, Any], redis: Redis
) -> None:
    alice = await new_operation(api, ALICE[1].account_id)
    bob = await new_operation(api, BOB[1].account_id)
    before = await redis.hgetall(
        PartitionKeys(partition_of(ALICE[1].account_id, 4)).operation(alice)
    )
    assert await reason(await consume(api, alice, KEYS.derive(bob))) == (403, "invalid_token")
    assert await reason(await consume(api, alice, "A" * 43)) == (403, "invalid_token")
    assert await reason(await consume(api, alice, KEYS.derive(alice)[:-1])) == (
        403,
        "invalid_token",
    )
    after = await redis.hgetall(
        PartitionKeys(partition_of(ALICE[1].account_id, 4)).operation(alice)
    )
    assert before == after
    assert (await consume(api, alice, KEYS.derive(alice))).status == 200


async def test_expired_token_is_refused(api: TestClient[Any, Any], redis: Redis) -> None:
    op = await new_operation(api, ALICE[1].account_id)
    pk = PartitionKeys(partition_of(ALICE[1].account_id, 4))
    await redis.hset(pk.operation(op), "token_expires_at", clock.now_ms() - 1)  # time passes
    assert await reason(await consume(api, op, KEYS.derive(op))) == (410, "token_expired")
    assert await redis.hget(pk.operation(op), "token_consumed_at") in (None, "0")


async def test_an_older_operations_token_is_superseded(redis: Redis, redis_server: Any) -> None:
    await seed_directory(redis)
    settings = admission_settings(redis_server.url, cooldown_seconds=0)
    pk = PartitionKeys(partition_of(ALICE[1].account_id, 4))
    async with serving(settings) as http:
        old = await new_operation(http, ALICE[1].account_id)
        await redis.hset(pk.operation(old), "state", "exhausted")  # delivery gave up
        new = await new_operation(http, ALICE[1].account_id)
        assert new != old
        assert await reason(await consume(http, old, KEYS.derive(old))) == (410, "token_superseded")
        assert (await consume(http, new, KEYS.derive(new))).status == 200


async def test_a_token_made_under_an_older_key_still_verifies_after_rotation(
    redis: Redis, redis_server: Any
) -> None:
    await seed_directory(redis)
    async with serving(admission_settings(redis_server.url, token_keys=K1_ONLY)) as before:
        op = await new_operation(before, ALICE[1].account_id)
    token = parse_keys(K1_ONLY).derive(op)  # what the email carried
    async with serving(admission_settings(redis_server.url, token_keys=ROTATED)) as after:
        fresh = await new_operation(after, BOB[1].account_id)
        assert (await consume(after, op, token)).status == 200
        # New operations use the new current key; the old key's token for them is worthless.
        assert await reason(await consume(after, fresh, parse_keys(K1_ONLY).derive(fresh))) == (
            403,
            "invalid_token",
        )
        assert (await consume(after, fresh, parse_keys(ROTATED).derive(fresh))).status == 200


async def test_unknown_and_malformed_operations_are_404(api: TestClient[Any, Any]) -> None:
    for op in ("op-1-01M8KVZDNBE35GX41B1GG54MAF", "op-9-01M8KVZDNBE35GX41B1GG54MAF"):
        assert await reason(await consume(api, op, "A" * 43)) == (404, "unknown_operation")

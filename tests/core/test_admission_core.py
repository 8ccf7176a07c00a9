"""The admission script against a real Redis: convergence, cooldown, creation."""

from __future__ import annotations

import asyncio

from redis.asyncio import Redis

from shared.admit import Admitter, unknown_account_id
from shared.keys import PartitionKeys, partition_of
from shared.scripts.admission import AdmitResult
from shared.settings import PolicySettings
from shared.tokens import TokenKeys


async def test_first_request_creates_and_enqueues_one_job(
    redis: Redis, settings: PolicySettings, token_keys: TokenKeys
) -> None:
    admitter = Admitter(redis, settings, token_keys)
    first = await admitter.admit("acct-1", "public")
    again = await admitter.admit("acct-1", "resend")
    assert first.result is AdmitResult.CREATED
    assert again.result is AdmitResult.CONVERGED
    assert again.operation_id == first.operation_id
    pk = PartitionKeys(partition_of("acct-1", settings.partitions))
    assert await redis.xlen(pk.send) == 1


async def test_200_concurrent_admissions_make_one_operation(
    redis: Redis, settings: PolicySettings, token_keys: TokenKeys
) -> None:
    clients = [Redis.from_url(settings.redis_url, decode_responses=True) for _ in range(200)]
    try:
        results = await asyncio.gather(
            *(Admitter(c, settings, token_keys).admit("acct-c", "public") for c in clients)
        )
    finally:
        await asyncio.gather(*(c.aclose() for c in clients))
    assert {r.operation_id for r in results} == {results[0].operation_id}
    assert sum(r.created for r in results) == 1
    pk = PartitionKeys(partition_of("acct-c", settings.partitions))
    assert await redis.xlen(pk.send) == 1


async def test_dry_run_writes_nothing(
    redis: Redis, settings: PolicySettings, token_keys: TokenKeys
) -> None:
    admitter = Admitter(redis, settings, token_keys)
    await admitter.admit(unknown_account_id("nobody@example.com"), "public", dry=True)
    assert await redis.dbsize() == 0

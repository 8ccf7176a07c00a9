"""An ambiguous attempt is settled only with the provider that holds it: asked elsewhere,
"not found" would replay it, and the holder may still deliver the first email."""

from __future__ import annotations

import aiohttp
from redis.asyncio import Redis

from services.poller.ambiguity import Resolution, reconcile
from shared.admit import Admitter
from shared.operations import BeginCode, begin_attempt, load_operation
from shared.providers.http import HttpProvider
from shared.settings import PolicySettings
from shared.tokens import TokenKeys
from tests.support.sandbox import SANDBOX_API_KEY, run_sandbox


async def ambiguous_at(redis: Redis, settings: PolicySettings, keys: TokenKeys, name: str) -> str:
    op = (await Admitter(redis, settings, keys).admit("acct-1", "public")).operation_id
    common = {"max_attempts": 6, "consumer": "t", "entry_id": "", "retention_ms": 60_000}
    await begin_attempt(redis, op, attempt_id="a1", now=1, lease_ms=1, provider=name, **common)
    took = await begin_attempt(redis, op, attempt_id="a2", now=10**13, lease_ms=1, **common)
    assert took.code is BeginCode.AMBIGUOUS
    return op


async def test_another_provider_never_settles_an_ambiguous_attempt(
    redis: Redis, settings: PolicySettings, token_keys: TokenKeys
) -> None:
    op = await ambiguous_at(redis, settings, token_keys, "standby")
    async with run_sandbox() as url, aiohttp.ClientSession() as session:
        primary = HttpProvider(session, url, SANDBOX_API_KEY, name="primary")
        here = settings.model_copy(update={"provider_name": "primary"})
        assert await reconcile(redis, primary, here, op) is Resolution.WAIT
        operation = await load_operation(redis, op)
        assert operation is not None and operation.state == "ambiguous"
        assert operation.provider == "standby"
        # The holder's poller does settle it (here: the sandbox has no record of it).
        holder = settings.model_copy(update={"provider_name": "standby"})
        assert await reconcile(redis, primary, holder, op) is not Resolution.WAIT

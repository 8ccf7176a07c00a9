"""An ambiguous attempt is settled only with the provider that holds it: asked elsewhere,
"not found" would replay it, and the holder may still deliver the first email."""

from __future__ import annotations

import aiohttp
from redis.asyncio import Redis

from services.poller.ambiguity import Resolution, reconcile
from shared import clock
from shared.admit import Admitter
from shared.operations import load_attempts, load_operation
from shared.providers.http import HttpProvider
from shared.scripts.attempts import BeginCode, ResolveAmbiguous, Settled
from shared.settings import PolicySettings
from shared.tokens import TokenKeys
from tests.support.attempts import begin
from tests.support.sandbox import SANDBOX_API_KEY, run_sandbox


async def ambiguous_at(redis: Redis, settings: PolicySettings, keys: TokenKeys, name: str) -> str:
    op = (await Admitter(redis, settings, keys).admit("acct-1", "public")).operation_id
    await begin(redis, op, "a1", 1, provider=name)
    took = await begin(redis, op, "a2", 10**13)
    assert took.code is BeginCode.AMBIGUOUS
    return op


async def test_another_provider_never_settles_an_ambiguous_attempt(
    redis: Redis, settings: PolicySettings, token_keys: TokenKeys
) -> None:
    op = await ambiguous_at(redis, settings, token_keys, "standby")
    async with run_sandbox() as url, aiohttp.ClientSession() as session:
        primary = HttpProvider(session, url, SANDBOX_API_KEY, name="primary")
        assert await reconcile(redis, primary, settings, op) is Resolution.WAIT
        operation = await load_operation(redis, op)
        assert operation is not None and operation.state == "ambiguous"
        assert operation.provider == "standby"
        # The holder does settle it (here: its sandbox has no record of it).
        standby = HttpProvider(session, url, SANDBOX_API_KEY, name="standby")
        assert await reconcile(redis, standby, settings, op) is not Resolution.WAIT


async def replayed_at(
    redis: Redis, settings: PolicySettings, keys: TokenKeys, name: str, pin_for: str
) -> str:
    op = (await Admitter(redis, settings, keys).admit("acct-2", "public")).operation_id
    now = clock.now_ms()
    await begin(redis, op, "a1", now, provider=name)
    took = await begin(redis, op, "a2", now + 10)
    assert took.code is BeginCode.AMBIGUOUS
    applied, _ = await ResolveAmbiguous(
        operation_id=op,
        now=now + 20,
        decision="replay",
        message_id="",
        observe_until=0,
        reason="test",
        retention_ms=60_000,
        pin=name,
        pin_for=pin_for,
    ).run(redis)
    assert applied is Settled.OK
    return op


async def test_a_replay_is_begun_only_at_the_provider_that_decided_it(
    redis: Redis, settings: PolicySettings, token_keys: TokenKeys
) -> None:
    op = await replayed_at(redis, settings, token_keys, "primary", "replay")
    before = len(await load_attempts(redis, op))
    other = await begin(redis, op, "b1", clock.now_ms(), lease_ms=5000, provider="standby")
    assert other.code is BeginCode.ELSEWHERE and other.detail == "primary"
    operation = await load_operation(redis, op)
    assert operation is not None and operation.state == "queued"  # nothing written
    assert len(await load_attempts(redis, op)) == before
    took = await begin(redis, op, "b2", clock.now_ms(), lease_ms=5000, provider="primary")
    assert took.code is BeginCode.BEGIN
    # Proven unsent by the lookup: pinned for the replay's attempt only.
    operation = await load_operation(redis, op)
    assert operation is not None and operation.pinned == ""


async def test_a_same_key_replay_stays_pinned_after_its_attempt(
    redis: Redis, settings: PolicySettings, token_keys: TokenKeys
) -> None:
    # Never proven unsent: only primary can deduplicate the key, so every later attempt
    # (after a 429 to the replay, say) goes there too.
    op = await replayed_at(redis, settings, token_keys, "primary", "proof")
    took = await begin(redis, op, "b2", clock.now_ms(), lease_ms=5000, provider="primary")
    assert took.code is BeginCode.BEGIN
    operation = await load_operation(redis, op)
    assert operation is not None and operation.pinned == "primary"

"""Closing an operation held for review: it ends as failed and nothing is sent for it, through
the one action ``resetgate ops review close`` and the console share (shared.actions), behind
the act role, a confirmation that names the effect and the form token; recorded in the trail."""

from __future__ import annotations

import argparse
from typing import Any

from redis.asyncio import Redis

from services.ctl import ops
from shared import actions, clock, ids
from shared.keys import AUDIT, PartitionKeys
from shared.model import CLOSED_AS
from shared.scripts.attempts import BeginAttempt, BeginCode
from tests.admission.helpers import seed_directory
from tests.console.helpers import console, console_settings, csrf_from, get_text, sign_in
from tests.console.test_console_http import _admit

RETENTION_MS = 3_600_000


async def _held_for_review(redis: Redis, url: str) -> str:
    """An admitted operation parked for review as resolve_ambiguous.lua parks one (its send
    job is still in the stream, as a stale job may be)."""
    await seed_directory(redis)
    op = await _admit(redis, url, "acct-alice")
    pk = PartitionKeys.of(op)
    await redis.hset(pk.operation(op), mapping={"state": "review", "reason": "unproven"})
    await redis.zadd(pk.review, {op: clock.now_ms()})
    return op


async def _state(redis: Redis, op: str) -> str:
    return str(await redis.hget(PartitionKeys.of(op).operation(op), "state"))


async def _never_sends(redis: Redis, op: str) -> None:
    """What a sender holding the stale job would do: begin_attempt skips it, release is refused."""
    begun = await BeginAttempt(
        operation_id=op,
        attempt_id=ids.attempt_id(),
        now=clock.now_ms(),
        lease_ms=30_000,
        max_attempts=6,
        consumer="c1",
        entry_id="",
        retention_ms=RETENTION_MS,
    ).run(redis)
    assert begun.code is BeginCode.SKIP
    assert not (await actions.release(redis, op, "cli:bob")).done
    assert await _state(redis, op) == str(CLOSED_AS)


async def test_on_call_closes_from_the_console_support_is_refused_and_nothing_is_sent(
    redis: Redis, redis_server: Any
) -> None:
    op = await _held_for_review(redis, redis_server.url)
    path = f"/console/operations/{op}/close"
    async with console(console_settings(redis_server.url, console_token_role="read")) as http:
        headers = await sign_in(http, "sue")
        assert (await http.get(path, headers=headers)).status == 403
        csrf = await csrf_from(http, "/console/", headers)  # a valid form token, no act role
        posted = await http.post(
            path, data={"csrf": csrf, "reason": "dup"}, headers=headers, allow_redirects=False
        )
        assert posted.status == 403
    assert await _state(redis, op) == "review"
    async with console(console_settings(redis_server.url)) as http:
        headers = await sign_in(http, "ann")
        page = await get_text(http, f"/console/operations/{op}", headers)
        assert f'href="{path}"' in page
        confirm = await get_text(http, path, headers)
        assert "without sending it" in confirm and "ends as failed" in confirm
        forged = await http.post(
            path, data={"csrf": "0" * 64, "reason": "dup"}, headers=headers, allow_redirects=False
        )
        assert forged.status == 403 and await _state(redis, op) == "review"
        csrf = await csrf_from(http, path, headers)
        done = await http.post(
            path,
            data={"csrf": csrf, "reason": "player got it by phone"},
            headers=headers,
            allow_redirects=False,
        )
        assert done.status == 303 and done.headers["Location"].endswith("result=closed")
        again = await http.post(
            path, data={"csrf": csrf, "reason": "twice"}, headers=headers, allow_redirects=False
        )
        assert again.status == 409
    pk = PartitionKeys.of(op)
    assert await _state(redis, op) == "failed"
    assert await redis.zscore(pk.review, op) is None and await redis.zscore(pk.live, op) is None
    assert await redis.zscore(pk.finished, op) is not None  # listed as recently failed
    assert 0 < await redis.pttl(pk.operation(op)) <= 30 * 24 * 3_600_000  # kept, then gone
    [entry] = [f for _, f in await redis.xrange(AUDIT) if f["action"] == "close"][:1]
    assert entry["actor"] == "console:ann" and entry["result"] == "done"
    assert entry["target"] == op and entry["reason"] == "player got it by phone"
    await _never_sends(redis, op)


async def test_the_cli_closes_through_the_same_action_and_refuses_what_is_not_held(
    redis: Redis, redis_server: Any
) -> None:
    op = await _held_for_review(redis, redis_server.url)
    settings = ops.OpsSettings(redis_url=redis_server.url)
    args = argparse.Namespace(operation_id=op, reason="duplicate", json=False)
    assert await ops.close(redis, settings, args) == 0
    await _never_sends(redis, op)
    live = await _admit(redis, redis_server.url, "acct-bob")  # queued, not held: refused
    refused = argparse.Namespace(operation_id=live, reason="oops", json=False)
    assert await ops.close(redis, settings, refused) == 1
    assert await _state(redis, live) == "queued"
    results = {(f["target"], f["result"]) for _, f in await redis.xrange(AUDIT)}
    assert (op, "done") in results and (live, "refused:queued") in results

"""Ambiguity is settled from capabilities, never by a blind replay (issue 11 item 3).

The table pins ``plan``; the runs drive a real sender and poller against the sandbox,
dropping the connection after the provider accepted 2% of the sends."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from redis.asyncio import Redis

from services.ctl.embedded import RedisServer
from services.poller.ambiguity import Situation, Step, plan
from services.sandbox.dialects import DIALECTS
from shared.model import State
from shared.operations import load_operation
from shared.providers import http, postmark, sendgrid
from tests.poller.conftest import running_poller
from tests.sender.conftest import Stack, wait_for
from tests.support.sandbox import configure, run_sandbox, sandbox_stats

KEYED = http.capabilities(60.0)  # key and key-lookup kept 60 s
FOUND_ONLY = postmark.capabilities(20.0)  # "found" is proof; "not found" never is
assert FOUND_ONLY.lookup is not None
NO_KEY_LOOKUP = replace(FOUND_ONLY, lookup=replace(FOUND_ONLY.lookup, proves_absence=True))
NEITHER = sendgrid.CAPABILITIES


@pytest.mark.parametrize(
    ("caps", "age", "closed", "step"),
    [
        (KEYED, 0.0, False, Step.LOOK_UP),  # inside the retention: ask at once
        (KEYED, 59.0, False, Step.LOOK_UP),
        (KEYED, 61.0, False, Step.WAIT),  # retention passed: "not found" would mean nothing
        (KEYED, 61.0, True, Step.REVIEW),
        (replace(KEYED, lookup=None), 10.0, False, Step.REPLAY),  # key alone: same-key replay
        (replace(KEYED, lookup=None), 61.0, False, Step.WAIT),
        (NO_KEY_LOOKUP, 5.0, False, Step.WAIT),  # the provider may still be processing it
        (NO_KEY_LOOKUP, 25.0, False, Step.LOOK_UP),
        (NO_KEY_LOOKUP, 46 * 86400.0, True, Step.REVIEW),  # older than the search keeps
        (FOUND_ONLY, 25.0, False, Step.WAIT),  # settled or not, "not found" proves nothing
        (FOUND_ONLY, 3 * 3600.0, True, Step.LOOK_UP_LAST),  # one last ask, then review
        (FOUND_ONLY, 46 * 86400.0, True, Step.REVIEW),
        (NEITHER, 5.0, False, Step.WAIT),  # an event may still prove acceptance
        (NEITHER, 5.0, True, Step.REVIEW),
    ],
)
def test_plan_follows_capabilities(caps: object, age: float, closed: bool, step: Step) -> None:
    assert plan(caps, Situation(age=age, window_closed=closed)) is step  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("caps", "age", "step"),
    [
        (NO_KEY_LOOKUP, 0.0, Step.LOOK_UP_EARLY),  # a "found" is proof at any age
        (NO_KEY_LOOKUP, 25.0, Step.LOOK_UP),  # trusted: asked like any other
        (FOUND_ONLY, 0.0, Step.LOOK_UP_EARLY),
        (FOUND_ONLY, 25.0, Step.LOOK_UP_EARLY),  # never trusted: only "found" counts
        (KEYED, 0.0, Step.LOOK_UP),  # a live key makes every answer usable at once
        (NEITHER, 0.0, Step.WAIT),  # nothing to ask
    ],
)
def test_an_unsettled_lookup_is_asked_once_at_once(caps: object, age: float, step: Step) -> None:
    where = Situation(age=age, window_closed=False, asked_early=False)
    assert plan(caps, where) is step  # type: ignore[arg-type]


async def _storm(
    stack: Stack, url: str, n: int, sender: dict[str, object], poller: dict[str, object]
) -> tuple[list[State], dict[str, object]]:
    ops = [await stack.admit(f"acct-amb-{i}", **sender) for i in range(n)]
    async with stack.sender(**sender), running_poller(stack, **poller):
        done = {State.ACCEPTED, State.REVIEW}
        finals = [await stack.wait_state(op, done, timeout=60) for op in ops]
    return [f.state for f in finals], await sandbox_stats(url)


def _no_duplicates(stats: dict[str, object], n: int) -> None:
    assert stats["duplicate_sends_total"] == 0
    assert stats["emails_sent_total"] == n  # every operation's one email, none twice
    assert stats["dropped_connections_total"] >= 1


async def test_key_kept_one_second_two_percent_dropped_no_duplicate(
    redis: Redis, redis_server: RedisServer
) -> None:
    n = 100
    async with run_sandbox(idempotency_window_seconds=1, drop_every=50) as url:
        stack = Stack(redis, redis_server.url, url)
        common = {"idempotency_window_seconds": 1, "observation_window_seconds": 3}
        states, stats = await _storm(
            stack, url, n, common, {**common, "reconcile_interval_seconds": 0.05}
        )
    _no_duplicates(stats, n)
    assert set(states) <= {State.ACCEPTED, State.REVIEW}


async def test_no_idempotency_key_two_percent_dropped_no_duplicate(
    redis: Redis, redis_server: RedisServer
) -> None:
    n = 100
    async with run_sandbox(mode="postmark", drop_every=50) as url:
        stack = Stack(redis, redis_server.url, url)
        kind = {
            "provider_kind": "postmark",
            "provider_name": "postmark",
            "reconcile_grace_seconds": 0.5,
        }
        states, stats = await _storm(stack, url, n, kind, kind)
    _no_duplicates(stats, n)
    assert states == [State.ACCEPTED] * n  # each dropped send found by its metadata


async def test_no_key_lookup_found_before_the_grace_is_accepted_at_once(
    redis: Redis, redis_server: RedisServer
) -> None:
    """The search is not trusted for an hour, yet every dropped send is accepted: a send
    the provider finds was taken, whatever its age (the storm's drain waited out the grace)."""
    n = 100
    async with run_sandbox(mode="postmark", drop_every=50) as url:
        stack = Stack(redis, redis_server.url, url)
        kind = {
            "provider_kind": "postmark",
            "provider_name": "postmark",
            "reconcile_grace_seconds": 3600,
        }
        states, stats = await _storm(stack, url, n, kind, kind)
    _no_duplicates(stats, n)
    assert states == [State.ACCEPTED] * n


async def test_no_key_lookup_not_found_before_the_grace_is_not_a_replay(
    redis: Redis, redis_server: RedisServer
) -> None:
    """A worker died before its call: Postmark has nothing. The early search says "not
    found", which is no answer yet: the attempt waits, no email is sent."""
    async with run_sandbox(mode="postmark") as url:
        stack = Stack(redis, redis_server.url, url)
        kind = {
            "provider_kind": "postmark",
            "provider_name": "postmark",
            "reconcile_grace_seconds": 3600,
        }
        op = await stack.admit("acct-early", **kind)
        await stack.abandoned_attempt(op)
        async with stack.sender(**kind), running_poller(stack, **kind):
            await stack.wait_state(op, {State.AMBIGUOUS})
            await wait_for(lambda: _searched(url), timeout=30)
            held = await load_operation(redis, op)
        stats = await sandbox_stats(url, operation_id=op)
    assert held is not None and held.state is State.AMBIGUOUS
    assert stats["emails_sent_total"] == 0


async def _searched(url: str) -> bool:
    routes = (await sandbox_stats(url))["requests_by_route"]
    assert isinstance(routes, dict)
    return bool(routes.get(f"GET {DIALECTS['postmark'].lookup_path}", 0))


async def test_after_the_key_retention_not_found_is_unknown_not_a_replay(
    redis: Redis, redis_server: RedisServer
) -> None:
    """The provider accepted, the connection dropped, and the key (1 s) is gone by the time
    the poller asks: the lookup says "not found", which must not become a second email."""
    async with run_sandbox(idempotency_window_seconds=1, drop_every=1) as url:
        stack = Stack(redis, redis_server.url, url)
        common = {"idempotency_window_seconds": 1, "observation_window_seconds": 2}
        op = await stack.admit("acct-late", **common)
        async with stack.sender(**common):
            await stack.wait_state(op, {State.AMBIGUOUS})
        await configure(url, drop_every=0)
        await asyncio.sleep(1.2)  # the key's retention passes before anyone asks
        async with stack.sender(**common), running_poller(stack, **common):
            final = await stack.wait_state(
                op, {State.REVIEW, State.ACCEPTED, State.QUEUED, State.DEFERRED}, timeout=15
            )
            await asyncio.sleep(0.5)
        stats = await sandbox_stats(url, operation_id=op)
    assert final.state is State.REVIEW
    assert stats["sent_by_operation"][op] == 1


async def test_no_key_and_no_lookup_waits_for_the_event_window_then_review(
    redis: Redis, redis_server: RedisServer
) -> None:
    async with run_sandbox(mode="sendgrid", drop_every=1) as url:
        stack = Stack(redis, redis_server.url, url)
        kind = {
            "provider_kind": "sendgrid",
            "provider_name": "sendgrid",
            "observation_window_seconds": 2,
        }
        op = await stack.admit("acct-neither", **kind)
        async with stack.sender(**kind), running_poller(stack, **kind):
            await stack.wait_state(op, {State.AMBIGUOUS})
            await asyncio.sleep(1.0)
            held = await load_operation(redis, op)
            assert held is not None and held.state is State.AMBIGUOUS  # still waiting
            final = await stack.wait_state(op, {State.REVIEW}, timeout=10)
        stats = await sandbox_stats(url, operation_id=op)
    assert final.state is State.REVIEW and stats["sent_by_operation"][op] == 1

"""The refusals guard on a real Redis and the Postmark sandbox (in-process sender, the real
``resetgate ops`` CLI).

- A refusal nobody documents, repeated for every send: the provider pauses within K
  distinct operations (kind "refusals", the reason in the pause), no operation fails, the
  operations that tripped it are held for review (not requeued to trip it again), the
  sender stays ready; ``ops provider-resume`` sends one of them as the probe, and every
  operation is then emailed once, with no second pause.
- The five-request attack: operations whose recipients Postmark refuses as documented
  (422 ErrorCode 406 "inactive recipient", postmarkapp.com/developer/api/overview#error-codes)
  fail alone; the provider never pauses and every other player's reset is sent.

The sandbox's "undocumented" refusal is, by design, in no provider's documentation: a 422
with an ErrorCode Postmark does not list (postmarkapp.com/developer/api/overview lists them).
"""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from services.ctl.embedded import RedisServer
from services.sender.app import readiness
from shared.control import read as read_control
from shared.model import Operation, State
from shared.operations import load_operation
from tests.ctl.test_ops import ops
from tests.providers.test_adapters_on_sandbox import overrides
from tests.sender.conftest import Stack, wait_for
from tests.support.sandbox import configure, run_sandbox, sandbox_stats

K = 5
N = 12
DONE = {State.ACCEPTED, State.FAILED, State.EXHAUSTED}
PAUSED = {State.REVIEW, State.QUEUED}


async def test_an_undocumented_refusal_of_every_send_pauses_holds_and_the_resume_probes(
    redis: Redis, redis_server: RedisServer
) -> None:
    async with run_sandbox(mode="postmark", refusal="undocumented") as url:
        stack = Stack(redis, redis_server.url, url)
        # One worker: nothing else is in flight as it trips, so it holds all K (with more,
        # one refused in flight waits in the queue instead; test_guard_trip_race.py).
        settings = overrides("postmark", concurrency=1, read_batch=1, refusal_guard_operations=K)
        ids = [await stack.admit(f"acct-guard-{i}") for i in range(N)]
        async with stack.sender(**settings) as sender:
            note = await wait_for(lambda: _pause(redis))
            assert note["kind"] == "refusals" and "error_code_9001" in note["reason"], note
            held = [str(h) for h in note["held"]]
            assert len(held) == K and set(held) <= set(ids), note
            waiting = await wait_for(lambda: _settled(stack, ids, held))
            assert not {op.state for op in waiting} & DONE, [op.state for op in waiting]
            assert all(op.attempts == 0 for op in waiting), [op.attempts for op in waiting]
            in_review = {op.operation_id for op in waiting if op.state is State.REVIEW}
            assert in_review == set(held), (in_review, held)
            assert not sender.sending_allowed()
            assert await readiness(sender, redis)() == {"redis": True}  # still ready
            refused = (await sandbox_stats(url))["refused_total"]
            assert K <= refused <= K + 2, refused  # within K (one more per worker in flight)
            await configure(url, refusal="")
            resumed = await asyncio.to_thread(
                ops, redis_server, "provider-resume", "--provider", "postmark"
            )
            out = resumed.stdout + resumed.stderr
            assert "refusals pause lifted" in out and "probe:" in out, out
            rest = [op for op in ids if op not in in_review]
            probe = next(op for op in held if op in in_review)
            for op in [*rest, probe]:
                assert (await stack.wait_state(op, DONE, timeout=30)).state is State.ACCEPTED
            still = [op for op in in_review if op != probe]
            assert all([(await stack.wait_state(op, {State.REVIEW})) for op in still])
            for op in still:  # a person releases the rest once the probe went out
                released = await asyncio.to_thread(ops, redis_server, "release", op)
                assert released.returncode == 0, released.stderr
            done = [await stack.wait_state(op, DONE, timeout=30) for op in ids]
            assert await _pause(redis) is None, "the resume re-tripped"
        stats = await sandbox_stats(url)
    assert [d.state for d in done] == [State.ACCEPTED] * N
    assert stats["emails_sent_total"] == N and stats["duplicate_sends_total"] == 0
    assert sorted(stats["sent_by_operation"].values()) == [1] * N


@pytest.mark.parametrize("entry_point", ["public", "contact_form"])
async def test_five_requests_for_refused_recipients_never_pause_the_provider(
    redis: Redis, redis_server: RedisServer, entry_point: str
) -> None:
    """Postmark refuses every address at attacker.example as inactive (one hard bounce makes
    an address inactive): those resets fail alone, K of them or more; the players' go out."""
    async with run_sandbox(mode="postmark", reject_domain="attacker.example") as url:
        stack = Stack(redis, redis_server.url, url)
        settings = overrides("postmark", concurrency=2, read_batch=1, refusal_guard_operations=K)
        async with stack.sender(**settings) as sender:
            # The attacker's requests first, with nothing accepted in between to end a streak.
            attack = [
                await stack.admit(f"acct-bad-{i}", "attacker.example", entry_point)
                for i in range(2 * K)
            ]
            bad = [await stack.wait_state(op, DONE, timeout=30) for op in attack]
            assert await _pause(redis) is None and sender.sending_allowed()
            players = [await stack.admit(f"acct-player-{i}") for i in range(N)]
            good = [await stack.wait_state(op, DONE, timeout=30) for op in players]
            assert sender.sending_allowed()
            assert await _pause(redis) is None
        stats = await sandbox_stats(url)
    assert {(op.state, op.reason) for op in bad} == {(State.FAILED, "inactive_recipient")}
    assert [op.state for op in good] == [State.ACCEPTED] * N
    assert stats["rejected_total"] == 2 * K and stats["emails_sent_total"] == N


async def _pause(redis: Redis) -> dict[str, object] | None:
    return (await read_control(redis)).auth_paused.get("postmark")


async def _settled(stack: Stack, ids: list[str], held: list[str]) -> list[Operation] | None:
    """The operations once the trip has settled them: the held ones in review, the others
    queued (waiting out the pause)."""
    loaded = [await load_operation(stack.redis, op) for op in ids]
    found = [op for op in loaded if op is not None]
    if len(found) < len(ids) or any(op.state not in PAUSED for op in found):
        return None
    if any(op.state is not State.REVIEW for op in found if op.operation_id in held):
        return None
    return found

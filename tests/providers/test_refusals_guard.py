"""The refusals guard: a provider that refuses every send with a reason no adapter knows
(the same each time) is refusing us, not the players. It pauses within K operations (kind
"refusals", the reason in the pause), the K operations whose refusal tripped it go back to
the queue with their attempt refunded (and any refused alike while it was tripping), and
after ``resetgate ops provider-resume`` (the real CLI) every operation is delivered once.

The sandbox's "undocumented" refusal is, by design, in no provider's documentation: a 422
with an ErrorCode Postmark does not list (postmarkapp.com/developer/api/overview lists the
codes), which the adapter reads as a permanent refusal of one recipient.
"""

from __future__ import annotations

import asyncio

from redis.asyncio import Redis

from services.ctl.embedded import RedisServer
from services.sender.guard import RefusalGuard, Refused
from shared.control import read as read_control
from shared.model import State
from tests.ctl.test_ops import ops
from tests.providers.test_adapters_on_sandbox import overrides
from tests.sender.conftest import Stack, wait_for
from tests.support.sandbox import configure, run_sandbox, sandbox_stats

K = 5
N = 12


async def test_refusals_of_every_operation_alike_pause_and_every_operation_is_delivered(
    redis: Redis, redis_server: RedisServer
) -> None:
    async with run_sandbox(mode="postmark", refusal="undocumented") as url:
        stack = Stack(redis, redis_server.url, url)
        settings = overrides("postmark", concurrency=1, read_batch=1,
                             refusal_guard_operations=K)  # fmt: skip
        ids = [await stack.admit(f"acct-guard-{i}") for i in range(N)]
        async with stack.sender(**settings) as sender:
            note = await wait_for(lambda: _pause(redis))
            assert note["kind"] == "refusals" and "error_code_9001" in note["reason"], note
            waiting = [await stack.wait_state(op, {State.QUEUED}) for op in ids]
            assert not sender.sending_allowed()
            refused = (await sandbox_stats(url))["refused_total"]
            assert K <= refused <= K + 1, refused  # within K (one more may be in flight)
            assert all(op.attempts == 0 for op in waiting), [op.attempts for op in waiting]
            await configure(url, refusal="")
            resumed = await asyncio.to_thread(ops, redis_server, "provider-resume",
                                              "--provider", "postmark")  # fmt: skip
            assert "refusals pause lifted" in resumed.stdout, resumed.stdout + resumed.stderr
            done = [await stack.wait_state(op, {State.ACCEPTED, State.FAILED, State.EXHAUSTED},
                                           timeout=30) for op in ids]  # fmt: skip
        stats = await sandbox_stats(url)
    assert [d.state for d in done] == [State.ACCEPTED] * N
    assert stats["emails_sent_total"] == N and stats["duplicate_sends_total"] == 0
    assert sorted(stats["sent_by_operation"].values()) == [1] * N


async def _pause(redis: Redis) -> dict[str, object] | None:
    return (await read_control(redis)).auth_paused.get("postmark")


def _refused(guard: RefusalGuard, op: str, at: int, reason: str = "r") -> list[Refused] | None:
    return guard.refused(Refused(op, "acct", at), reason)


def test_the_guard_counts_distinct_operations_one_reason_inside_the_window() -> None:
    guard = RefusalGuard(3, window_ms=1000)
    assert _refused(guard, "a", 0) is None and _refused(guard, "a", 1) is None  # not distinct
    assert _refused(guard, "b", 2) is None
    tripped = _refused(guard, "c", 3)
    assert [r.operation_id for r in tripped or []] == ["a", "b", "c"] and guard.tripped == "r"
    guard = RefusalGuard(3, window_ms=1000)
    _refused(guard, "a", 0), _refused(guard, "b", 1, "other")  # another reason: a new streak
    assert _refused(guard, "c", 2, "other") is None
    guard = RefusalGuard(3, window_ms=1000)
    _refused(guard, "a", 0), _refused(guard, "b", 1)
    assert _refused(guard, "c", 1500) is None  # "a" is older than the window
    guard.accepted()  # any acceptance ends the streak
    assert _refused(guard, "d", 1600) is None and _refused(guard, "e", 1700) is None
    assert RefusalGuard(0, 1000).refused(Refused("a", "acct", 0), "r") is None  # off

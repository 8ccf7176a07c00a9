"""The refusals guard's trip is one decision, not a race with the attempts in flight: 40
operations, four workers, every send refused by an answer no provider documents (the
Postmark sandbox's 422 with an ErrorCode postmarkapp.com/developer/api/overview does not
list). The provider pauses once with the reason it counted, and no operation fails or is
exhausted: each is held for review or waits in the queue (docs/providers.md, "Whose refusal
is it"). Run 20 times in a row for the record (docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from redis.asyncio import Redis

from services.ctl.embedded import RedisServer
from shared.control import read as read_control
from shared.model import State
from shared.operations import load_operation
from tests.providers.test_adapters_on_sandbox import overrides
from tests.sender.conftest import Stack, wait_for
from tests.support.sandbox import run_sandbox

K = 5
N = 40
WAITING = {State.REVIEW, State.QUEUED}


async def test_forty_operations_under_an_undocumented_refusal_none_fails(
    redis: Redis, redis_server: RedisServer
) -> None:
    async with run_sandbox(mode="postmark", refusal="undocumented") as url:
        stack = Stack(redis, redis_server.url, url)
        settings = overrides("postmark", concurrency=4, read_batch=4, refusal_guard_operations=K)
        ids = [await stack.admit(f"acct-race-{i}") for i in range(N)]
        async with stack.sender(**settings):
            note = await wait_for(_pause(redis), timeout=30)

            async def settled() -> list[State] | None:
                states = [op.state for op in [await load_operation(redis, o) for o in ids] if op]
                return states if len(states) == N and set(states) <= WAITING else None

            states = await wait_for(settled, timeout=30)
    assert note["kind"] == "refusals" and "error_code_9001" in str(note["reason"]), note
    assert len(note["held"]) == K, note
    assert states.count(State.REVIEW) <= K, states  # the rest wait out the pause, queued


def _pause(redis: Redis) -> Callable[[], Awaitable[dict[str, object] | None]]:
    async def probe() -> dict[str, object] | None:
        return (await read_control(redis)).auth_paused.get("postmark")

    return probe

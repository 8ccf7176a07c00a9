"""A job a live sender has taken is never claimed by another, however long it waits its turn."""

from __future__ import annotations

import asyncio

import pytest

from services.sender.intake import send_jobs
from shared.keys import SEND_GROUP, PartitionKeys
from tests.sender.conftest import Stack

# A lease (5 s in these tests) must pass for the take-over to be possible at all.
pytestmark = pytest.mark.slow

OTHER_SENDER = "other-sender"
# 0.5 sends/s and no burst: of 5 jobs read at once, the last waits 8 s, beyond a lease.
SLOW_PACE = {"provider_max_rate": 0.5, "provider_min_rate": 0.5, "provider_burst": 1}
JOBS = 5


async def test_a_job_queued_behind_a_slow_pace_for_a_lease_is_not_taken_over(
    stack: Stack,
) -> None:
    settings = stack.settings(**SLOW_PACE)
    for i in range(JOBS):
        await stack.admit(f"acct-held-{i}")
    async with stack.sender(**SLOW_PACE):
        await asyncio.sleep(settings.lease_seconds + 0.6)
        pending = [row for p in range(settings.partitions) for row in await _pending(stack, p)]
        # What another sender's claim loop does: every entry pending longer than a lease.
        taken = [
            entry.entry_id
            for p in range(settings.partitions)
            for entry in (
                await send_jobs(stack.redis, p, OTHER_SENDER).claim(
                    settings.lease_seconds * 1000, 100
                )
            ).entries
        ]
    assert pending, "every job was sent within a lease: the test proves nothing"
    assert taken == []
    # Not taken over by its own claim loop either (a claim counts one more delivery).
    assert {(row["consumer"], row["times_delivered"]) for row in pending} == {
        (settings.consumer_name, 1)
    }


async def _pending(stack: Stack, partition: int) -> list[dict[str, object]]:
    stream = PartitionKeys(partition).send
    rows = await stack.redis.xpending_range(stream, SEND_GROUP, "-", "+", 100)
    return [
        {k: (v.decode() if isinstance(v, bytes) else v) for k, v in row.items()} for row in rows
    ]

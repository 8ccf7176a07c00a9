"""The home page counts what failed, was exhausted or bounced in the last hour and day, and
lists them newest first, paged, each list on its own page number (the indexes the ending
scripts write: tests/core/test_recent_index.py)."""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis

from shared import actions, clock, ids
from shared.keys import PartitionKeys
from shared.scripts.observation import Applied, ApplyDelivery
from tests.admission.helpers import seed_directory
from tests.console.helpers import console, console_settings, get_text, sign_in
from tests.console.test_console_http import _admit


def _section(page: str, heading: str) -> str:
    return page.split(f'id="{heading}"')[1].split("</section>")[0]


async def test_counts_and_lists_of_the_last_day_are_paged_each_on_its_own(
    redis: Redis, redis_server: Any
) -> None:
    await seed_directory(redis)
    now = clock.now_ms()
    closed = await _admit(redis, redis_server.url, "acct-alice")
    pk = PartitionKeys.of(closed)
    await redis.hset(pk.operation(closed), "state", "review")
    assert (await actions.close(redis, closed, "cli:bob", "duplicate", 3_600_000)).done
    bounced = await _admit(redis, redis_server.url, "acct-bob")
    await redis.hset(PartitionKeys.of(bounced).operation(bounced), "state", "accepted")
    code, *_ = await ApplyDelivery(
        message_id="m-1",
        event_type="bounced",
        occurred_at=now,
        now=now,
        operation_id=bounced,
        mode="record",
    ).run(redis)
    assert code is Applied.APPLIED
    older = [ids.operation_id(i % 4, now) for i in range(24)]  # a day old, less an hour
    for i, op in enumerate(older):
        await redis.zadd(PartitionKeys.of(op).finished, {op: now - 7_200_000 - i})
        await redis.hset(PartitionKeys.of(op).operation(op), "state", "exhausted")
    async with console(console_settings(redis_server.url)) as http:
        headers = await sign_in(http)
        first = await get_text(http, "/console/overview/live", headers)
        second = await get_text(http, "/console/overview/live?failed_page=2&page=1", headers)
        home = await get_text(http, "/console/?failed_page=2", headers)
    hour = first.split('data-count="failed-hour"')[1].split("</div>")[0]
    assert "<strong>1</strong>" in hour and "25 in the last day" in hour
    assert "<strong>1</strong>" in first.split('data-count="bounced-hour"')[1].split("</div>")[0]
    failed_one, failed_two = _section(first, "failed-h"), _section(second, "failed-h")
    assert f"{closed}</a> (failed, closed by cli:bob: duplicate" in failed_one
    assert failed_one.count("<li>") == 20 and failed_two.count("<li>") == 5
    assert "Page 1 of 2 (25 in the last day)" in failed_one
    assert 'href="/console/?page=1&amp;failed_page=2&amp;bounced_page=1">Next' in failed_one
    assert older[-1] in failed_two and older[-1] not in failed_one and closed not in failed_two
    assert f"{bounced}</a> (bounced" in _section(second, "bounced-h")  # its own page: 1
    assert "failed_page=2" in home.split("data-live-url=")[1].split(">")[0]
    assert "alice.mail@example.com" not in first and "bob.mail@example.org" not in first

"""The poller's own request budget, 429 + Retry-After on the polling routes, and the
stored cursor (a restart resumes; a replayed page is harmless)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from services.poller.budget import Budget
from shared.keys import POLLER_CURSOR, poller_cursor
from shared.model import Delivery, State
from shared.settings import DEFAULT_PROVIDER
from tests.poller.conftest import running_poller, sample
from tests.poller.test_observation_feed import delivery_of
from tests.sender.conftest import Stack, wait_for
from tests.support.sandbox import configure, sandbox_stats

CURSOR = poller_cursor(DEFAULT_PROVIDER)  # the single-provider settings' one feed
THROTTLED = "resetgate_poll_throttled_total"


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_budget_spends_tokens_and_refills_at_the_configured_rate() -> None:
    clock = FakeClock()
    budget = Budget(per_minute=60, burst=2, backoff_cap=60, clock=clock)
    assert budget.take() == 0 and budget.take() == 0
    assert budget.take() == pytest.approx(1.0)  # one request per second from here
    clock.now += 1.0
    assert budget.take() == 0


def test_budget_429_blocks_for_the_advice_or_a_capped_backoff() -> None:
    clock = FakeClock()
    budget = Budget(per_minute=6000, burst=10, backoff_cap=5, clock=clock)
    assert budget.throttled(7.0) == 7.0
    assert budget.wait() == pytest.approx(7.0)
    clock.now += 7.0
    assert budget.wait() == 0
    assert [budget.throttled(None) for _ in range(4)] == [4.0, 5.0, 5.0, 5.0]  # 2^n, capped
    budget.answered()
    assert budget.throttled(0.0) == 1.0, "Retry-After: 0 must not become a spin"


@pytest.mark.parametrize("form", ["delay-seconds", "imf-fixdate"])
async def test_poll_429_waits_for_retry_after(stack: Stack, form: str) -> None:
    await configure(
        stack.provider_url,
        poll_rate_per_second=0.5,
        poll_burst=1,
        retry_after_form=form,
        delivered_delay_seconds=0.1,
    )
    before = sample(THROTTLED, provider=DEFAULT_PROVIDER, route="events")
    op = await stack.admit(f"acct-throttled-{form}")
    async with stack.sender(), running_poller(stack):
        await delivery_of(stack, op, {Delivery.DELIVERED})
        await asyncio.sleep(2.5)
    stats = await sandbox_stats(stack.provider_url)
    assert sample(THROTTLED, provider=DEFAULT_PROVIDER, route="events") > before
    # Every 0.05 s without honouring Retry-After would be ~60 polls and ~55 429s here.
    assert stats["poll_throttled_total"] <= 4
    assert stats["requests_by_route"].get("GET /email/events", 0) <= 8


async def test_own_budget_caps_requests_even_when_the_provider_allows_more(
    stack: Stack,
) -> None:
    async with running_poller(stack, poll_max_requests_per_minute=60, poll_burst=1):
        await asyncio.sleep(2.2)
    stats = await sandbox_stats(stack.provider_url)
    assert 1 <= stats["requests_by_route"].get("GET /email/events", 0) <= 4


async def test_restart_resumes_from_the_cursor_and_a_replay_is_harmless(stack: Stack) -> None:
    await configure(stack.provider_url, delivered_delay_seconds=0.1)
    first = await stack.admit("acct-cursor-1")
    async with stack.sender():
        async with running_poller(stack):
            await delivery_of(stack, first, {Delivery.DELIVERED})
        cursor = await stack.redis.get(CURSOR)
        assert cursor
        second = await stack.admit("acct-cursor-2")
        await stack.wait_state(second, {State.ACCEPTED})
        duplicates = sample("resetgate_delivery_events_duplicate_total")
        async with running_poller(stack):
            await delivery_of(stack, second, {Delivery.DELIVERED})
        assert sample("resetgate_delivery_events_duplicate_total") == duplicates, "resumed"
        # A crash after applying a page but before storing the cursor replays that page.
        await stack.redis.set(CURSOR, "0")
        async with running_poller(stack):
            await wait_for(
                lambda: _at_least("resetgate_delivery_events_duplicate_total", duplicates + 2)
            )
    for op in (first, second):
        assert (await delivery_of(stack, op, {Delivery.DELIVERED})).state == State.ACCEPTED


async def _at_least(name: str, value: float) -> bool:
    return sample(name) >= value


async def test_a_cursor_beyond_the_feeds_end_is_said_and_the_feed_read_again(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 15 item 3: `make run` restarted keeps Redis (and the cursor) but the sandbox's
    feed starts again from nothing. The poller says so (log line, metric) and reads the new
    feed from its start, so what is sent from now on is observed."""
    await configure(stack.provider_url, delivered_delay_seconds=0.1)
    await stack.redis.set(CURSOR, "1000000")  # the feed that issued it is gone
    resets = sample("resetgate_poll_cursor_resets_total", provider=DEFAULT_PROVIDER)
    op = await stack.admit("acct-cursor-beyond")
    with caplog.at_level(logging.WARNING, logger="services.poller.feed"):
        async with stack.sender(), running_poller(stack):
            await delivery_of(stack, op, {Delivery.DELIVERED})
    assert sample("resetgate_poll_cursor_resets_total", provider=DEFAULT_PROVIDER) == resets + 1
    assert "cursor is beyond the feed's end" in caplog.text
    assert int(await stack.redis.get(CURSOR) or 0) < 1000000


async def test_the_first_provider_resumes_from_the_cursor_kept_before_cursors_were_per_provider(
    stack: Stack,
) -> None:
    # An upgrade keeps rg:poller:cursor: the first listed provider starts from it (here a
    # cursor its feed no longer knows, so the feed says so and both keys are cleared).
    await stack.redis.set(POLLER_CURSOR, "1000000")
    resets = sample("resetgate_poll_cursor_resets_total", provider=DEFAULT_PROVIDER)
    async with running_poller(stack):
        await wait_for(lambda: _reset_since(resets))
    assert await stack.redis.get(POLLER_CURSOR) is None


async def _reset_since(before: float) -> bool:
    return sample("resetgate_poll_cursor_resets_total", provider=DEFAULT_PROVIDER) > before

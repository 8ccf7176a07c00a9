"""The last hour per provider: the pacer's own counts (its scripts, as the senders run them)
sampled per minute into a ring (chart_sample.lua) and drawn on the home page. Each send is
counted once however many console replicas sample; a gap without a sample draws nothing
rather than an hour as one minute, while a late sample still counts; the ring forgets a
minute an hour old; the oldest eligible operation's share of its horizon goes to the
provider of its partition."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio import Redis

from services.admission.console import charts
from shared import clock, keys
from shared.keys import PartitionKeys
from shared.scripts.charts import ChartSample
from shared.scripts.pacing import Observation, PaceAcquire, PaceFeedback, Tuning
from tests.admission.helpers import seed_directory
from tests.console.helpers import console, console_settings, get_text, sign_in
from tests.console.test_console_http import _admit
from tests.console.test_console_providers import TWO

MINUTE = 60_000
T0 = 1_800_000_000_000 // MINUTE * MINUTE  # a minute's start


async def _sends(redis: Redis, provider: str, now: int, accepted: int, throttled: int) -> None:
    """What a sender reports: accepted sends with a reservation, each 429 as feedback."""
    await PaceAcquire(
        provider=provider, now=now, ceiling=100, burst=5, want=1, accepted=accepted, tuning=Tuning()
    ).run(redis)
    for _ in range(throttled):
        seen = Observation(now, now, throttled=True)
        await PaceFeedback(provider=provider, seen=seen, floor=1, tuning=Tuning()).run(redis)


async def _sample(redis: Redis, now: int, oldest: int = -1) -> bool:
    return await ChartSample(
        provider="p", now=now, oldest=oldest, max_gap_ms=charts.MAX_GAP_MS, keep_ms=charts.KEEP_MS
    ).run(redis)


async def _series(redis: Redis, now: int) -> charts.Series:
    return (await charts.read(redis, ["p"], now))["p"]


async def test_each_send_and_429_is_counted_once_into_its_minute(redis: Redis) -> None:
    assert not await _sample(redis, T0)  # the first sample is the baseline
    await _sends(redis, "p", T0 + 1000, accepted=5, throttled=2)
    assert await _sample(redis, T0 + 10_000)
    assert await _sample(redis, T0 + 10_000)  # another replica at once: nothing twice
    await _sends(redis, "p", T0 + MINUTE + 5000, accepted=3, throttled=0)
    assert await _sample(redis, T0 + MINUTE + 10_000)
    series = await _series(redis, T0 + MINUTE + 10_000)
    assert series.accepted[-2:] == [5, 3] and series.throttled[-2:] == [2, 0]
    assert series.accepted[:-2] == [None] * 58  # nobody sampled then: no data, not zero
    assert 0 < await redis.pttl(keys.provider_minutes("p")) <= charts.KEEP_MS


async def test_a_gap_draws_nothing_and_a_late_sample_still_counts(redis: Redis) -> None:
    await _sample(redis, T0)
    await _sends(redis, "p", T0 + 1000, accepted=4, throttled=1)
    # Late, but within the gap a sample may take (a loaded console): still counted.
    assert await _sample(redis, T0 + charts.MAX_GAP_MS)
    # No console for ten minutes: what was sent meanwhile is not one minute's worth.
    await _sends(redis, "p", T0 + 2 * MINUTE, accepted=600, throttled=50)
    later = T0 + charts.MAX_GAP_MS + 10 * MINUTE
    assert not await _sample(redis, later)
    await _sends(redis, "p", later + 1000, accepted=2, throttled=0)
    assert await _sample(redis, later + 10_000)
    series = await _series(redis, later + 10_000)
    assert series.accepted[-1] == 2 and sum(v or 0 for v in series.accepted) == 6


async def test_a_sample_from_a_slower_clock_counts_nothing_and_moves_nothing_back(
    redis: Redis,
) -> None:
    await _sample(redis, T0 + 20_000)
    await _sends(redis, "p", T0 + 21_000, accepted=7, throttled=0)
    assert not await _sample(redis, T0 + 15_000)  # a replica whose clock is 5 s behind
    assert await _sample(redis, T0 + 30_000)
    assert (await _series(redis, T0 + 30_000)).accepted[-1] == 7


async def test_the_ring_forgets_a_minute_an_hour_old_and_keeps_the_largest_share(
    redis: Redis,
) -> None:
    await _sample(redis, T0, oldest=300)
    await _sends(redis, "p", T0 + 1000, accepted=9, throttled=0)
    await _sample(redis, T0 + 10_000, oldest=700)
    await _sample(redis, T0 + 20_000, oldest=400)
    series = await _series(redis, T0 + 20_000)
    assert series.oldest[-1] == 0.7 and series.accepted[-1] == 9
    # An hour on, the same slot holds the new minute, from zero.
    hour = T0 + 60 * MINUTE
    for at in range(T0 + 30_000, hour + 1, 30_000):
        await _sample(redis, at)
    series = await _series(redis, hour)
    assert series.accepted[-1] == 0 and series.oldest[-1] is None and 9 not in series.accepted


async def test_the_home_page_draws_each_providers_hour(
    redis: Redis, redis_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in TWO.items():
        monkeypatch.setenv(name, value)
    await seed_directory(redis)
    op = await _admit(redis, redis_server.url, "acct-alice")
    # The operation's partition sends through standby: its share is standby's, not primary's.
    await redis.hset(keys.CONTROL, f"provider:{PartitionKeys.of(op).partition}", "standby")
    settings = console_settings(redis_server.url)
    start = clock.now_ms()
    await charts.sample(redis, settings, start)
    await _sends(redis, "primary", start + 1, accepted=12, throttled=3)
    await charts.sample(redis, settings, start + 2)
    async with console(settings) as http:
        headers = await sign_in(http)
        live = await get_text(http, "/console/overview/live", headers)
    primary = live.split('<tr data-chart="primary">')[1].split("</tr>")[0]
    standby = live.split('<tr data-chart="standby">')[1].split("</tr>")[0]
    # (What "this minute" holds depends on whether a minute turned since the samples.)
    assert "12 accepted in the last hour" in primary and "3 429s in the last hour" in primary
    assert '<rect class="accepted"' in primary and '<rect class="throttled"' in primary
    assert "no eligible operation in the last hour" in primary
    assert "of its horizon, at most 0.0 %" in standby and '<circle class="oldest"' in standby
    assert "0 accepted in the last hour" in standby

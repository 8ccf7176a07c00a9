"""The pacing arithmetic: the two Lua scripts on a real Redis, driven by hypothesis.

Properties: a reserved slot never comes faster than the ceiling allows (beyond the burst),
a cut never takes the rate under the floor, and a block ends exactly at the advised
instant (never a slot before it, and the first slot right at it when the schedule is free);
a sender that stalled spends no more than a burst of the slots it missed.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis, RedisCluster

from services.ctl.embedded import RedisServer
from services.sandbox.retry_after import imf_fixdate
from services.sender import pacing
from services.sender.pacer import Pacer
from shared import clock, keys
from shared.model import Outcome
from shared.providers.base import SendResult
from shared.rate_signal import RateSignal
from shared.scripts.pacing import Observation, PaceAcquire, PaceFeedback, Tuning
from tests.conftest import CLUSTER

pytestmark = pytest.mark.cluster_pass  # also on a Redis Cluster: make test-cluster

# The arithmetic once the schedule runs: no slow start (tests/sender/test_pacing_measured.py).
TUNING = Tuning(start_rate=0)
NOW = 1_800_000_000_000
FAST = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def run(redis_server: RedisServer, steps: object) -> object:
    async def main() -> object:
        client: Any = (
            RedisCluster.from_url(redis_server.url, decode_responses=True)
            if CLUSTER
            else Redis.from_url(redis_server.url, decode_responses=True)
        )
        try:
            await client.delete(keys.provider_pacing("prop"))
            return await steps(client)  # type: ignore[operator]
        finally:
            await client.aclose()

    return asyncio.run(main())


@FAST
@given(
    ceiling=st.floats(1, 500),
    burst=st.integers(1, 20),
    gaps=st.lists(st.integers(0, 300), min_size=1, max_size=15),
    wants=st.lists(st.integers(1, 40), min_size=15, max_size=15),
)
def test_slots_never_come_faster_than_the_ceiling(redis_server, ceiling, burst, gaps, wants):
    async def steps(client: Redis) -> list[float]:
        now, times = NOW, []
        for gap, want in zip(gaps, wants, strict=False):
            now += gap
            slots = await PaceAcquire(
                provider="prop", now=now, ceiling=ceiling, burst=burst, want=want, tuning=TUNING
            ).run(client)
            assert slots.rate <= ceiling + 1e-3
            assert slots.count <= want
            times += [max(t, now) for t in slots.times_ms()]
        return times

    times = run(redis_server, steps)
    assert isinstance(times, list)
    # Over any stretch, at most burst + rate x stretch slots (GCRA's promise).
    for i, first in enumerate(times):
        for j in range(i + 1, len(times)):
            # (slot times travel as whole microseconds: a thousandth of a slot of slack)
            assert j - i + 1 <= burst + (times[j] - first) * ceiling / 1000 + 1e-3


@FAST
@given(
    floor=st.floats(0.5, 50),
    ceiling_over_floor=st.floats(1, 20),
    throttles=st.lists(st.booleans(), min_size=1, max_size=30),
)
def test_cuts_never_go_under_the_floor_nor_over_the_ceiling(
    redis_server, floor, ceiling_over_floor, throttles
):
    ceiling = floor * ceiling_over_floor

    async def steps(client: Redis) -> None:
        now = NOW
        for throttled in throttles:
            now += 50
            slots = await PaceAcquire(
                provider="prop", now=now, ceiling=ceiling, burst=5, want=1, tuning=TUNING
            ).run(client)
            assert floor - 1e-3 <= slots.rate <= ceiling + 1e-3
            if throttled:
                seen = Observation(now + 1, now, throttled=True)
                adjusted = await PaceFeedback(
                    provider="prop", seen=seen, floor=floor, tuning=TUNING
                ).run(client)
                assert floor - 1e-3 <= adjusted.rate <= ceiling + 1e-3

    run(redis_server, steps)


@FAST
@given(block_ms=st.integers(1, 120_000), ceiling=st.floats(1, 1000))
def test_a_block_ends_exactly_at_the_advised_instant(redis_server, block_ms, ceiling):
    until = NOW + block_ms

    async def steps(client: Redis) -> None:
        seen = Observation(NOW, NOW, throttled=True, blocked_until=until)
        await PaceFeedback(provider="prop", seen=seen, floor=1, tuning=TUNING).run(client)
        now = NOW
        while now < until + 1000:
            slots = await PaceAcquire(
                provider="prop", now=now, ceiling=ceiling, burst=10, want=50, tuning=TUNING
            ).run(client)
            if slots.count:
                first = slots.times_ms()[0]
                assert first >= until - 1  # never a send before the advised instant
                assert first < max(until, now) + 1000 / slots.rate + 1  # nor idle past it
                return
            now += slots.wait_ms
        raise AssertionError("no slot after the block")

    run(redis_server, steps)


def test_one_congestion_event_costs_one_cut(redis_server) -> None:
    async def steps(client: Redis) -> list[bool]:
        slots = await PaceAcquire(
            provider="prop", now=NOW, ceiling=100, burst=5, want=10, tuning=TUNING
        ).run(client)
        cuts = []
        for i, slot in enumerate(slots.times_ms()):
            seen = Observation(NOW + 30 + i, slot, throttled=True)
            cuts.append(
                (
                    await PaceFeedback(provider="prop", seen=seen, floor=1, tuning=TUNING).run(
                        client
                    )
                ).cut
            )
        return cuts

    # Ten 429s for slots reserved before the first cut: one cut, not ten.
    assert run(redis_server, steps) == [True] + [False] * 9


def test_the_rate_climbs_back_and_probes_once_the_provider_is_quiet(redis_server) -> None:
    async def steps(client: Redis) -> list[float]:
        await PaceAcquire(
            provider="prop", now=NOW, ceiling=100, burst=5, want=1, tuning=TUNING
        ).run(client)
        # Most sends were taken: the provider is near our rate, and a tenth is the cut.
        seen = Observation(NOW + 10, NOW, throttled=True, accepted=5)
        await PaceFeedback(provider="prop", seen=seen, floor=1, tuning=TUNING).run(client)
        rates = []
        for seconds in (0, 1, 2, 4, 6):
            slots = await PaceAcquire(
                provider="prop",
                now=NOW + 10 + seconds * 1000,
                ceiling=100,
                burst=5,
                want=1,
                tuning=TUNING,
            ).run(client)
            rates.append(slots.rate)
        return rates

    rates = run(redis_server, steps)
    assert rates[0] == 90  # one 429 costs a tenth
    assert rates == sorted(rates) and rates[-1] == 100  # back at the ceiling within seconds


def test_a_stalled_sender_catches_up_with_at_most_a_burst(redis_server, monkeypatch) -> None:
    """A process that stalled past its slots (a busy core) spends the ones it missed by at
    most ``burst`` slots' worth, and drops the older ones: sent all at once they would be
    more than the provider's bucket refilled meanwhile, and each 429 cuts the shared rate."""
    spacing = 1000 / 200
    missed = [NOW - k * spacing for k in range(40, -1, -1)]  # 40 slots late, the last due now

    async def steps(client: Redis) -> list[float | None]:
        pacer = Pacer(client, "prop", ceiling=200, floor=1, burst=5, max_wait=60)
        pacer._slots.extend(missed)
        monkeypatch.setattr(clock, "now_ms", lambda: NOW)
        stop = asyncio.Event()
        return [await pacer.acquire(stop) for _ in range(6)]

    # The slot due now and the five before it (25 ms = 5 slots late); the 35 older dropped.
    assert run(redis_server, steps) == missed[-6:]


def test_a_429_that_says_nothing_pauses_every_sender_for_a_burst_refill(redis_server) -> None:
    """Postmark's 429 carries no wait: the shared schedule is blocked for the time a burst
    takes to refill at the current rate (5 slots at 200/s: 25 ms), not a fixed pause that
    idles every replica long after the provider's bucket has refilled."""

    async def steps(client: Redis) -> tuple[int, int, int]:
        pacer = Pacer(client, "prop", ceiling=200, floor=1, burst=5, max_wait=60)
        before = clock.now_ms()
        await pacer.observe(SendResult(Outcome.THROTTLED, 429), before)
        after = clock.now_ms()
        blocked = int(await client.hget(keys.provider_pacing("prop"), "blocked_until") or 0)
        return before, blocked, after

    before, blocked, after = run(redis_server, steps)
    assert before + 25 <= blocked <= after + 25  # the refill, from the moment it was seen


# -- what a provider's answer advises (pure) -------------------------------------------
@given(seconds=st.integers(0, 3600))
def test_a_delay_of_one_second_is_a_ceiling_and_a_longer_one_is_waited(seconds: int) -> None:
    result = SendResult(Outcome.THROTTLED, 429, retry_after=str(seconds))
    expected = seconds * 1000 if seconds >= 2 else 20  # one second states nothing: no advice
    assert pacing.block_until(result, NOW, 20.0) == NOW + expected


@given(offset_ms=st.integers(0, 600_000))
def test_an_http_date_is_an_instant_to_the_millisecond(offset_ms: int) -> None:
    when = (NOW + offset_ms) // 1000 * 1000 + 1000  # a whole second, as HTTP dates are
    result = SendResult(
        Outcome.THROTTLED,
        429,
        retry_after=imf_fixdate(when / 1000),
        server_date=imf_fixdate(NOW / 1000),
    )
    assert pacing.block_until(result, NOW, 20.0) == when


def test_a_skewed_provider_clock_keeps_the_interval_it_meant() -> None:
    served = NOW / 1000 + 3600  # its clock is an hour ahead of ours
    result = SendResult(
        Outcome.THROTTLED, 429, retry_after=imf_fixdate(served + 5), server_date=imf_fixdate(served)
    )
    assert pacing.block_until(result, NOW, 20.0) == NOW + 5000


def test_a_reset_epoch_blocks_to_the_millisecond_and_remaining_caps_the_rate() -> None:
    empty = RateSignal(limit=600, remaining=0, reset_at=(NOW + 1234.5) / 1000)
    seen = pacing.observe(SendResult(Outcome.ACCEPTED, 200, rate=empty), NOW, NOW, 1.0, 20.0)
    assert seen.blocked_until == NOW + 1234 and seen.matters(50)
    some = RateSignal(limit=600, remaining=20, reset_at=(NOW + 2000) / 1000)
    seen = pacing.observe(SendResult(Outcome.ACCEPTED, 200, rate=some), NOW, NOW, 1.0, 20.0)
    assert seen.hint == 10 and seen.hint_until == NOW + 2000
    assert seen.matters(50) and not seen.matters(5)  # a cap above our rate costs no call


def test_no_advice_pauses_for_the_given_refill_time() -> None:
    result = SendResult(Outcome.THROTTLED, 429, retry_after="soon")
    assert pacing.block_until(result, NOW, 16.7) == NOW + 17


def test_a_declared_account_rate_is_a_ceiling() -> None:
    assert pacing.declared_rate(RateSignal(account_rate=14.0)) == 14.0
    assert pacing.declared_rate(RateSignal(limit=600)) is None
    assert datetime.now(UTC)  # (HTTP dates above are rendered in GMT by the sandbox)

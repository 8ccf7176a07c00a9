"""Pacing that finds any real rate within a few 429s: a cut is measured from what the
provider accepted (the scripts on a real Redis). The storms at 1 and 0.2 sends/s with a
burst of 1 are benchmarks/storm.py --scenario slow-1 / slow-0.2 (docs/performance.md)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from redis.asyncio import Redis

from services.ctl.embedded import RedisServer
from shared import keys
from shared.scripts.pacing import Adjusted, Observation, PaceAcquire, PaceFeedback, Slots, Tuning
from tests.sender.test_pacing import NOW, run

TUNING = Tuning()

CEILING = 50.0  # PROVIDER_MAX_RATE's default: a ceiling nobody tuned
FLOOR = 0.05


async def _reserve(client: Redis, at: int, accepted: int = 0, want: int = 10) -> Slots:
    return await PaceAcquire(
        provider="prop",
        now=at,
        ceiling=CEILING,
        burst=5,
        want=want,
        tuning=TUNING,
        accepted=accepted,
    ).run(client)


async def _slot(client: Redis, at: int, accepted: int = 0) -> tuple[int, float]:
    """The next slot from ``at`` on, asking again as the script says: (now, its time)."""
    while not (slots := await _reserve(client, at, accepted, want=1)).count:
        at += slots.wait_ms
        accepted = 0
    return at, max(at, slots.first_ms)


async def _taken_then_refused(client: Redis, **seen: Any) -> tuple[int, Adjusted]:
    """The first send taken, the next one refused: (when, what the cut made of it)."""
    at, slot = await _slot(client, NOW)
    at, slot = await _slot(client, at + 10, accepted=1)
    at = int(slot) + 5
    return at, await _throttled(client, at, slot, **seen)


async def _throttled(client: Redis, at: int, slot: float, **seen: Any) -> Adjusted:
    observed = Observation(at, slot, throttled=True, **seen)
    return await PaceFeedback(provider="prop", seen=observed, floor=FLOOR, tuning=TUNING).run(
        client
    )


def test_a_fresh_schedule_starts_slow_and_doubles_per_accepted_send(
    redis_server: RedisServer,
) -> None:
    """One slot now, not a burst, at the start rate; each send accepted doubles the rate
    until the ceiling (or the first 429): 50/s in six answers, not seven 429s into a
    provider that takes one a second before the first answer is back."""

    async def steps(client: Redis) -> tuple[list[float], list[float]]:
        first = (await _reserve(client, NOW)).times_ms()
        rates, at = [], NOW
        for _ in range(7):
            at, _ = await _slot(client, at, accepted=1)
            rates.append((await _reserve(client, at, want=1)).rate)
        return first, rates

    first, rates = run(redis_server, steps)
    spacing = 1000 / TUNING.start_rate  # one slot now, the next a slot later: no burst
    assert first == [NOW + k * spacing for k in range(len(first))]
    assert rates[:3] == [TUNING.start_rate * 2**k for k in (1, 2, 3)]
    assert rates[-1] == CEILING and all(b >= a for a, b in itertools.pairwise(rates))


def test_far_above_the_provider_one_429_settles_just_under_what_it_accepted(
    redis_server: RedisServer,
) -> None:
    """SES's 1 send/s against the default 50/s ceiling: one send taken, the next refused
    20 ms later. Not 0.9 x 50: the provider took one send in (at least) a second."""

    async def steps(client: Redis) -> tuple[float, int, float]:
        at, adjusted = await _taken_then_refused(client)
        return adjusted.rate, at, (await _slot(client, at + 5))[1]

    rate, refused_at, next_slot = run(redis_server, steps)
    assert rate == TUNING.settle * 1.0
    assert next_slot >= refused_at + 1000 / rate - 1  # the bucket is empty: a slot away (µs)


def test_a_wait_of_whole_seconds_settles_the_rate_at_one_send_per_wait(
    redis_server: RedisServer,
) -> None:
    async def steps(client: Redis) -> float:
        _, adjusted = await _taken_then_refused(client, advised_rate=1 / 5)  # Retry-After: 5
        return adjusted.rate

    assert run(redis_server, steps) <= 0.2 * TUNING.settle


def test_nothing_accepted_halves_the_rate_down_to_the_floor(redis_server: RedisServer) -> None:
    async def steps(client: Redis) -> list[float]:
        rates, at = [], NOW
        for _ in range(12):
            at, slot = await _slot(client, at)
            at = int(slot) + 200
            rates.append((await _throttled(client, at, slot)).rate)
        return rates

    rates = run(redis_server, steps)
    assert rates[0] == TUNING.start_rate * TUNING.empty_cut and rates[-1] == FLOOR


def test_below_the_slot_rate_the_climb_runs_per_slot(redis_server: RedisServer) -> None:
    """Settled at 0.95/s, the rate is still under the provider's 1/s a minute later (a probe
    per second of quiet at 50/s would be a 429 every few seconds at 1/s)."""

    async def steps(client: Redis) -> float:
        at, _ = await _taken_then_refused(client)
        return (await _reserve(client, at + 60_000, want=1)).rate

    assert run(redis_server, steps) < 1.0


def test_after_a_blackout_the_rate_climbs_back_to_the_settled_rate_within_seconds(
    redis_server: RedisServer,
) -> None:
    async def steps(client: Redis) -> tuple[float, float]:
        at, adjusted = await _taken_then_refused(client)
        settled, at = adjusted.rate, at + 1000
        for _ in range(8):  # a run of 429s, nothing accepted: down to the floor
            at, slot = await _slot(client, at)
            at = int(slot) + 10
            await _throttled(client, at, slot)
        pacing_key = keys.provider_pacing("prop")
        assert float(await client.hget(pacing_key, "base") or 0) == FLOOR
        return settled, (await _reserve(client, at + 15_000, want=1, accepted=1)).rate

    settled, rate = run(redis_server, steps)
    assert rate == settled


def test_a_blackout_from_the_first_send_is_left_by_a_slow_start(
    redis_server: RedisServer,
) -> None:
    """Refused from the first send on, the rate falls to the floor with no settled rate to
    return to: once sends are accepted again it doubles per accepted send (a send every 20 s
    at the floor would never find a provider at 10/s again)."""

    async def steps(client: Redis) -> list[float]:
        at = NOW
        for _ in range(10):
            at, slot = await _slot(client, at)
            at = int(slot) + 10
            await _throttled(client, at, slot)
        rates = []
        for _ in range(8):  # the blackout is over: each send is taken
            at, slot = await _slot(client, at, accepted=1 if rates else 0)
            at = int(slot) + 10
            rates.append((await _reserve(client, at, want=1, accepted=1)).rate)
        return rates

    rates = run(redis_server, steps)
    assert rates[0] == 2 * FLOOR and rates[-1] == CEILING


def test_within_a_second_of_the_last_cut_a_count_halves_at_most(
    redis_server: RedisServer,
) -> None:
    """A burst of congestion near 20/s: a second cut 0.2 s after the first, one send taken
    in between, is no measure of a rate of one a second."""

    async def steps(client: Redis) -> tuple[float, float]:
        at = NOW
        for _ in range(5):  # the slow start up to 40/s, every send taken
            at, _ = await _slot(client, at, accepted=1)
            at += 10
        at, slot = await _slot(client, at, accepted=1)
        before = (await _throttled(client, at + 5, slot, accepted=4)).rate
        at += 200
        for _ in range(4):  # four slots given, one send taken, then a 429
            at, slot = await _slot(client, at)
            at = int(slot) + 1
        after = (await _throttled(client, at + 5, slot, accepted=1)).rate
        return before, after

    before, after = run(redis_server, steps)
    assert before * TUNING.empty_cut <= after < before  # a cut, but not to one a second


def test_one_429_among_many_accepted_sends_is_an_ordinary_cut(redis_server: RedisServer) -> None:
    """Under load a second of answers is on its way and accepted sends are reported late:
    refusals are weighed against answers, so one 429 after 20 answers taken cuts a tenth,
    not to the 20/s reported taken while 50 slots were given."""

    async def steps(client: Redis) -> tuple[float, float]:
        at, _ = await _slot(client, NOW)
        for _ in range(6):  # the slow start to the ceiling, every send taken
            at, _ = await _slot(client, at + 10, accepted=1)
        for _ in range(10):  # a second at the ceiling: 50 slots given, 20 answers back
            slots = await _reserve(client, at, want=5, accepted=2)
            at += 100
        rate = slots.rate
        return rate, (await _throttled(client, at, slots.times_ms()[-1], accepted=0)).rate

    rate, after = run(redis_server, steps)
    assert after == pytest.approx(rate * TUNING.cut, rel=0.01)

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


def test_the_slow_start_is_clocked_by_answers(redis_server: RedisServer) -> None:
    """A send accepted in the slow start frees the next slot now, not one slot of the
    doubled rate after the last (at 5/s that slot was 200 ms away: the climb to 200/s took
    0.3 s of every storm); the answer says a slow start is under way, so the pacer asks as
    soon as a send is accepted. At the ceiling the slow start is over."""

    async def steps(client: Redis) -> tuple[Slots, list[Slots], Slots]:
        first = await _reserve(client, NOW, want=1)
        at, answered = NOW + 10, []
        for _ in range(3):
            answered.append(await _reserve(client, at, accepted=1, want=1))
            at += 10
        for _ in range(4):
            await _reserve(client, at, accepted=1, want=1)
            at += 10
        return first, answered, await _reserve(client, at, want=1)

    first, answered, after = run(redis_server, steps)
    assert first.starting and first.count == 1
    assert all(
        s.starting and s.count == 1 and s.first_ms == NOW + 10 * (k + 1)
        for k, s in enumerate(answered)
    )
    assert after.rate == CEILING and not after.starting


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


async def _refused_for(client: Redis, seconds: float, at: int = NOW) -> list[tuple[float, float]]:
    """Every probe refused (no stated wait) for ``seconds``: (time refused so far, the gap
    to the next probe) per probe, in seconds."""
    probes: list[tuple[float, float]] = []
    at, slot = await _slot(client, at)
    first = slot
    while slot - first < seconds * 1000:
        at = int(slot) + 20
        await _throttled(client, at, slot)
        at, following = await _slot(client, at)
        probes.append(((slot - first) / 1000, (following - slot) / 1000))
        slot = following
    return probes


def test_while_every_probe_is_refused_the_gap_stays_a_share_of_the_outage(
    redis_server: RedisServer,
) -> None:
    """Nothing accepted: the rate halves, but the gap between two probes stays under 4 % of
    the time refused so far (at least a second), and reaches the floor's 20 s only after
    500 s. The two harms: a 90 s outage found 20 s late (the floor alone), and a provider
    that says nothing hammered (here: about 25 probes per e-fold of the outage)."""

    async def steps(client: Redis) -> tuple[list[tuple[float, float]], float]:
        probes = await _refused_for(client, 700)
        base = float(await client.hget(keys.provider_pacing("prop"), "base") or 0)
        return probes, base

    probes, base = run(redis_server, steps)
    first_gap = probes[0][1]
    assert first_gap == pytest.approx(1 / (TUNING.start_rate * TUNING.empty_cut), abs=0.05)
    share = TUNING.outage_share
    for refused, gap in probes:
        bound = max(TUNING.probe_gap_ms / 1000, share * (refused + gap), 1 / TUNING.start_rate)
        assert gap <= bound + 0.05, (refused, gap)
    late = [gap for refused, gap in probes if 80 <= refused <= 90]
    assert late and max(late) <= share * 90 + 0.05  # a 90 s outage is found within 3.6 s
    in_90 = sum(1 for refused, _ in probes if refused <= 90)
    in_600 = sum(1 for refused, _ in probes if refused <= 600)
    assert in_90 <= 60 and in_600 <= 110  # bounded: not one probe per slot of any rate
    assert base == FLOOR and probes[-1][1] == pytest.approx(1 / FLOOR, abs=0.05)


def test_accepted_again_the_slot_promised_at_the_floor_is_pulled_in(
    redis_server: RedisServer,
) -> None:
    """At the floor the next slot is 20 s away; the first send accepted again starts a slow
    start at start_rate, and that slot comes one slot of the new rate after the accepted one
    (one email every 12-18 s for a minute after an incident, before)."""

    async def steps(client: Redis) -> tuple[float, float]:
        probes = await _refused_for(client, 600)
        accepted_slot = NOW + sum(gap for _, gap in probes) * 1000
        _, following = await _slot(client, int(accepted_slot) + 20, accepted=1)
        rate = float(await client.hget(keys.provider_pacing("prop"), "rate") or 0)
        return rate, following - accepted_slot

    rate, gap_ms = run(redis_server, steps)
    assert rate == TUNING.start_rate
    assert gap_ms <= 1000 / TUNING.start_rate + 1


def test_a_stated_wait_is_a_pause_to_the_instant_not_a_cut(redis_server: RedisServer) -> None:
    """A 429 that states when (a window's reset, an HTTP date): the next slot is exactly
    then and the rate is what it was; a later 429 for the same reason is the same pause."""

    async def steps(client: Redis) -> list[tuple[float, float, float]]:
        seen = []
        at, slot = await _slot(client, NOW)
        for _ in range(4):
            before = float(await client.hget(keys.provider_pacing("prop"), "rate") or 0)
            stated = at + 1000
            adjusted = await _throttled(client, at, slot, blocked_until=stated, stated=True)
            at, slot = await _slot(client, at)
            seen.append((before, adjusted.rate, slot - stated))
            at = int(slot) + 20
        return seen

    for before, after, late_ms in run(redis_server, steps):
        assert after == pytest.approx(before, rel=0.01)  # not a cut
        assert 0 <= late_ms <= 1  # the next send goes at the stated instant


def test_a_stated_whole_seconds_wait_ends_at_its_instant_then_paces_per_wait(
    redis_server: RedisServer,
) -> None:
    """Retry-After: 5 at a slow provider: the next send goes exactly 5 s later (not one
    slot of the settled rate, 5.26 s, later), and the rate settles at one send per wait."""

    async def steps(client: Redis) -> tuple[float, float]:
        at, slot = await _slot(client, NOW)
        stated = at + 5000
        adjusted = await _throttled(
            client, at, slot, blocked_until=stated, stated=True, advised_rate=0.2
        )
        at, slot = await _slot(client, at)
        return adjusted.rate, slot - stated

    rate, late_ms = run(redis_server, steps)
    assert rate == pytest.approx(TUNING.settle * 0.2, rel=0.01)
    assert 0 <= late_ms <= 1


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
        for _ in range(8):  # a run of 429s, nothing accepted: halving
            at, slot = await _slot(client, at)
            at = int(slot) + 10
            await _throttled(client, at, slot)
        return settled, (await _reserve(client, at + 15_000, want=1, accepted=1)).rate

    settled, rate = run(redis_server, steps)
    assert rate >= settled


def test_a_blackout_from_the_first_send_is_left_by_a_slow_start(
    redis_server: RedisServer,
) -> None:
    """Refused from the first send on, there is no settled rate to return to: once sends
    are accepted again the rate restarts at start_rate and doubles per accepted send up to
    the ceiling (a send every 20 s at the floor would never find a provider at 10/s again)."""

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
    assert rates[0] == TUNING.start_rate and rates[-1] == CEILING


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


async def _calm_at(client: Redis, ceiling: float, calm_ms: int) -> tuple[int, float]:
    """The slow start to ``ceiling``, every send taken, then ``calm_ms`` at it without a
    429: (now, the rate given last)."""
    at = NOW
    for _ in range(8):
        slots = await PaceAcquire(
            provider="prop", now=at, ceiling=ceiling, burst=5, want=1, tuning=TUNING, accepted=1
        ).run(client)
        at += 10
    for _ in range(calm_ms // 100):
        slots = await _at(client, at, ceiling, accepted=int(ceiling / 10))
        at += 100
    return at, slots.rate


async def _at(client: Redis, at: int, ceiling: float, accepted: int = 0) -> Slots:
    return await PaceAcquire(
        provider="prop", now=at, ceiling=ceiling, burst=5, want=1, tuning=TUNING, accepted=accepted
    ).run(client)


def test_a_cut_after_a_calm_spell_is_back_at_the_rate_it_left_within_recover_ms(
    redis_server: RedisServer,
) -> None:
    """At 200/s for two seconds, one 429 (a probe, or sends that reached the provider
    bunched): the cut is a tenth, as before, but the rate is back at the 200/s it left
    within recover_ms, fast at first (nearly half the way in a fifth of the time), where
    the climb of 5 %/s took two seconds and more 429s pulled it lower each time."""

    async def steps(client: Redis) -> tuple[float, float, float, float]:
        at, before = await _calm_at(client, 200.0, 2000)
        cut = (await _throttled(client, at, at - 1.0, accepted=20)).rate
        early = (await _at(client, at + TUNING.recover_ms // 5, 200.0, accepted=1)).rate
        back = (await _at(client, at + TUNING.recover_ms, 200.0, accepted=40)).rate
        return before, cut, early, back

    before, cut, early, back = run(redis_server, steps)
    assert cut == pytest.approx(before * TUNING.cut, rel=0.01)
    assert cut + 0.45 * (before - cut) < early < before
    assert back == pytest.approx(before, rel=0.01)


def test_a_calm_cut_goes_back_to_what_the_provider_took_not_above_it(
    redis_server: RedisServer,
) -> None:
    """The opposite failure of the way back: the rate climbed to 220/s while the provider
    took 200/s (its bucket let the excess through until the 429). Going back to the rate
    it left was a 429 a second; the way back ends at the 200/s taken since the rate
    settled (or since the cut, the first time), and the climb goes on from the cut."""

    async def spell(client: Redis, at: int) -> tuple[int, float, float, float]:
        """Three seconds of 20 sends taken per 100 ms, then a 429: (now, the rate cut from,
        the cut rate, the rate a way back later)."""
        for _ in range(30):
            at += 100
            given = (await _at(client, at, 220.0, accepted=20)).rate
        cut = (await _throttled(client, at, at - 1.0)).rate
        return at, given, cut, (await _at(client, at + TUNING.recover_ms, 220.0)).rate

    async def steps(client: Redis) -> list[tuple[float, float, float]]:
        at, _ = await _calm_at(client, 220.0, 0)
        at, *first = await spell(client, at)
        _, *second = await spell(client, at + TUNING.recover_ms)
        return [tuple(first), tuple(second)]  # type: ignore[list-item]

    climbed = 1 + TUNING.growth * TUNING.recover_ms / 1000
    for given, cut, back in run(redis_server, steps):
        assert given == 220.0 and cut == pytest.approx(given * TUNING.cut)
        assert back <= max(200.0, cut * climbed) + 1e-6  # was 220: the rate it left


def test_429s_in_quick_succession_get_no_way_back(redis_server: RedisServer) -> None:
    """The opposite failure: a provider far below the rate answers 429 again and again
    (each one a horizon after the last cut). Only a cut after a calm spell keeps the rate
    it left; here every cut stands and the rate climbs from it as before, so the way back
    never carries the rate into the 429s it is leaving."""

    async def steps(client: Redis) -> tuple[float, float, float]:
        at, _ = await _calm_at(client, 200.0, 2000)
        first = (await _throttled(client, at, at - 1.0, accepted=20)).rate
        at += 2 * TUNING.horizon_ms
        second = (await _throttled(client, at, at - 1.0, accepted=30)).rate
        later = (await _at(client, at + TUNING.recover_ms, 200.0, accepted=1)).rate
        return first, second, later

    first, second, later = run(redis_server, steps)
    assert second == pytest.approx(first * TUNING.cut, rel=0.02)
    assert later <= second * (1 + TUNING.growth * TUNING.recover_ms / 1000) + 1e-6


def test_below_the_slot_rate_a_cut_gets_no_way_back(redis_server: RedisServer) -> None:
    """At 50/s (below slot_rate) a calm spell's cut climbs per slot as before: a provider
    of a few sends a second with a burst of 1 refuses every send above its rate."""

    async def steps(client: Redis) -> tuple[float, float]:
        at, _ = await _calm_at(client, 50.0, 2000)
        cut = (await _throttled(client, at, at - 1.0, accepted=5)).rate
        return cut, (await _at(client, at + TUNING.recover_ms, 50.0, accepted=5)).rate

    cut, later = run(redis_server, steps)
    assert later <= cut * (1 + TUNING.growth * TUNING.recover_ms / 1000)

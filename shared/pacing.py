"""Provider-wide pacing: the typed calls to its two scripts and what an answer advises.

The schedule lives in Redis under the provider's own hash tag (``pace_acquire.lua``,
``pace_feedback.lua``), so every sender replica shares one rate. The arithmetic of the rate
is in those scripts only; this module says what to ask them and reads what a provider's
answer means for them: when a block ends, and what rate an ``X-RateLimit-*`` hint allows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from shared.keys import provider_pacing
from shared.model import Outcome
from shared.providers.base import SendResult
from shared.rate_signal import RateSignal
from shared.redis import RedisClient
from shared.retry_after import MAX_DELAY_MS, parse_http_date
from shared.scripts import Request, Script, key

# Our clock and the provider's Date header agree this closely (the header has a resolution
# of one second): an HTTP date is then an instant on our clock, kept to the millisecond.
CLOCK_AGREEMENT_MS = 2000
# A wait of whole seconds up to this long says one send per wait is the provider's rate now
# (its bucket's refill); a longer one is a block, not a rate.
MAX_RATE_WAIT_S = 60


@dataclass(frozen=True, slots=True)
class Tuning:
    """How the shared rate moves. One 429 costs a tenth of the rate; the rate then climbs
    back by 5 % of itself per second, and after 2 quiet seconds the probe adds a term that
    grows with the square of the quiet time, so a provider that stopped throttling (a
    schedule going back up, a shared quota freed) is found again within seconds."""

    cut: float = 0.9
    growth: float = 0.05  # share of the post-cut rate per second
    quiet_ms: int = 2000
    probe: float = 0.2  # share of the post-cut rate per second squared
    # Slots are reserved this far ahead: it bounds how stale a replica's view of a cut or a
    # block can be, and sets how many sends one round trip covers (rate x horizon).
    horizon_ms: int = 100
    # Below this rate the climb above the settled rate runs per slot, not per second: a
    # provider at 1 send/s is probed every few minutes, not every few seconds.
    slot_rate: float = 100.0
    # A measured cut lands this far under the rate the provider accepted: at exactly its
    # rate, the jitter of every send's arrival would make every other one a 429.
    settle: float = 0.95
    empty_cut: float = 0.5  # a 429 after nothing was accepted since the last cut
    # A fresh schedule's rate, doubled per accepted send until the first 429 (slow start).
    # At 10/s the first reservation held two slots, and when the first answer came back
    # after the second's 429 the cut measured nothing: slow-1 drained in 1.63 x, not 1.05.
    start_rate: float = 5.0


@dataclass(frozen=True, slots=True)
class Slots:
    count: int
    first_ms: float
    rate: float
    blocked_until: int
    wait_ms: int

    def times_ms(self) -> list[float]:
        spacing = 1000 / self.rate
        return [self.first_ms + i * spacing for i in range(self.count)]


@dataclass(frozen=True, slots=True)
class Observation:
    """What one answer tells the shared schedule."""

    now: int
    slot_ms: float  # when the send's slot was due: a 429 for an older slot cuts nothing
    throttled: bool = False
    blocked_until: int = 0
    hint: float = 0.0  # sends/s allowed until hint_until (0 = no hint)
    hint_until: int = 0
    returned_ms: float = 0.0  # span of reserved slots the caller dropped
    advised_rate: float = 0.0  # one send per whole-seconds wait a 429 advised (0 = none)
    accepted: int = 0  # sends this replica saw accepted and has not reported yet

    def matters(self, rate: float) -> bool:
        """True when the shared schedule must hear of it: a 429, a block, a lower cap."""
        return self.throttled or self.blocked_until > self.now or 0 < self.hint < rate


@dataclass(frozen=True, slots=True)
class Adjusted:
    rate: float
    blocked_until: int
    cut: bool


@dataclass(slots=True, kw_only=True)
class PaceAcquire(Request[Slots]):
    SCRIPT = Script("pace_acquire")

    pacing: str = key()
    now: int
    ceiling: float
    burst: float
    want: int
    horizon_ms: int
    growth: float
    quiet_ms: int
    probe: float
    accepted: int
    slot_rate: float
    start_rate: float

    def decode(self, raw: Any) -> Slots:
        count, first_us, rate_milli, blocked, wait = (int(x) for x in raw)
        return Slots(count, first_us / 1000, rate_milli / 1000, blocked, wait)


@dataclass(slots=True, kw_only=True)
class PaceFeedback(Request[Adjusted]):
    SCRIPT = Script("pace_feedback")

    pacing: str = key()
    now: int
    throttled: bool
    slot_ms: float
    blocked_until: int
    floor: float
    cut: float
    hint: float
    hint_until: int
    returned_ms: float
    horizon_ms: int
    accepted: int
    advised_rate: float
    settle: float
    empty_cut: float

    def decode(self, raw: Any) -> Adjusted:
        return Adjusted(int(raw[0]) / 1000, int(raw[1]), bool(int(raw[2])))


async def reserve(
    client: RedisClient,
    provider: str,
    *,
    now: int,
    ceiling: float,
    burst: float,
    want: int,
    tuning: Tuning,
    accepted: int = 0,
) -> Slots:
    return await PaceAcquire(
        pacing=provider_pacing(provider), now=now, ceiling=ceiling, burst=burst, want=want,
        horizon_ms=tuning.horizon_ms, growth=tuning.growth, quiet_ms=tuning.quiet_ms,
        probe=tuning.probe, accepted=accepted, slot_rate=tuning.slot_rate,
        start_rate=tuning.start_rate,
    ).run(client)  # fmt: skip


async def feedback(
    client: RedisClient, provider: str, seen: Observation, *, floor: float, tuning: Tuning
) -> Adjusted:
    return await PaceFeedback(
        pacing=provider_pacing(provider), now=seen.now, throttled=seen.throttled,
        slot_ms=seen.slot_ms, blocked_until=seen.blocked_until, floor=floor, cut=tuning.cut,
        hint=seen.hint, hint_until=seen.hint_until, returned_ms=seen.returned_ms,
        horizon_ms=tuning.horizon_ms, accepted=seen.accepted, advised_rate=seen.advised_rate,
        settle=tuning.settle, empty_cut=tuning.empty_cut,
    ).run(client)  # fmt: skip


def observe(
    result: SendResult, slot_ms: float, now: int, floor: float, no_advice_ms: float
) -> Observation:
    """What one send result tells the shared schedule (``no_advice_ms``: see block_until)."""
    throttled = result.outcome is Outcome.THROTTLED
    block = block_until(result, now, no_advice_ms) if throttled else 0
    if throttled and 2 <= (wait := whole_seconds(result)) <= MAX_RATE_WAIT_S:
        return Observation(now, slot_ms, throttled, block, advised_rate=1 / wait)
    signal = result.rate
    if signal is not None and signal.reset_at is not None and signal.remaining is not None:
        reset_ms = int(signal.reset_at * 1000)
        if signal.remaining < 1 and reset_ms > now:
            block = max(block, reset_ms)  # nothing left in this window: not one more call
        elif reset_ms > now:
            hint = max(floor, signal.remaining * 1000 / (reset_ms - now))
            return Observation(now, slot_ms, throttled, block, hint, reset_ms)
    return Observation(now, slot_ms, throttled, block)


def block_until(result: SendResult, now: int, no_advice_ms: float) -> int:
    """The instant a 429 says sending may resume.

    An HTTP date names an instant: sending resumes exactly then, not at the next whole
    second of our clock. A delay in seconds is rounded up by the provider, so the real wait
    is somewhere in the last second before it: a delay of one second blocks nothing and the
    cut rate spaces the next sends (a ceiling, not a floor); a longer one, which only a slow
    provider gives, blocks all of it (see ``_seconds_block``). A 429 that says nothing
    (Postmark's) means the provider's bucket is empty now: sending resumes after
    ``no_advice_ms`` (the time a burst takes to refill at our rate), at the cut rate.
    """
    value = (result.retry_after or "").strip()
    if value.isdigit() and value.isascii():
        return now + min(_seconds_block(int(value)) * 1000, MAX_DELAY_MS)
    if value and (at := _date_instant(value, result.server_date, now)):
        return at
    signal = result.rate
    if signal is not None and signal.reset_at is not None:
        return max(0, int(signal.reset_at * 1000))
    # No advice at all: a pause, and the cut (every 429 cuts the shared rate), so a provider
    # that says nothing is never hammered. A fixed pause (it was a second, then 200 ms) idled
    # every sender long after the provider's bucket had refilled: the Postmark storm drained
    # in 1.88 x, then 1.10 x ideal.
    return now + round(no_advice_ms)


def _seconds_block(seconds: int) -> int:
    """How long a wait of whole seconds blocks: one second less when it is one second (at
    a fast rate the provider's bucket refills within it, and a full second would idle every
    sender), the whole wait when longer (a slow provider: ending early costs a 429, ending
    late a fraction of a slot)."""
    return seconds if seconds >= 2 else 0


def whole_seconds(result: SendResult) -> int:
    """A 429's Retry-After in delay-seconds (0 when it has none in that form)."""
    value = (result.retry_after or "").strip()
    return min(int(value), MAX_DELAY_MS // 1000) if value.isdigit() and value.isascii() else 0


def _date_instant(value: str, server_date: str | None, now: int) -> int:
    today = datetime.fromtimestamp(now / 1000, UTC)
    when = parse_http_date(value, today)
    if when is None:
        return 0
    at = int(when.timestamp() * 1000)
    served = parse_http_date(server_date.strip(), today) if server_date else None
    if served is None:
        return at
    served_ms = int(served.timestamp() * 1000)
    if abs(served_ms - now) <= CLOCK_AGREEMENT_MS:
        return at
    # Clocks disagree: keep the provider's interval, measured from its own Date.
    return now + min(max(0, at - served_ms), MAX_DELAY_MS)


def declared_rate(signal: RateSignal | None) -> float | None:
    """The account's declared sustained rate (SES MaxSendRate), a ceiling for the pacer."""
    if signal is None or signal.account_rate is None or signal.account_rate <= 0:
        return None
    return signal.account_rate

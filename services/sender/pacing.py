"""What a provider's answer advises the shared pacing: when a block ends, and what rate an
``X-RateLimit-*`` hint allows.

The schedule lives in Redis under the provider's own hash tag (``pace_acquire.lua``,
``pace_feedback.lua``; their requests in shared/scripts/pacing.py), so every sender replica
shares one rate. The arithmetic of the rate is in those scripts only.
"""

from __future__ import annotations

from shared.clock import to_datetime, to_ms, to_seconds
from shared.model import Outcome
from shared.providers.base import SendResult
from shared.rate_signal import RateSignal
from shared.retry_after import MAX_DELAY_MS, Source, parse_http_date
from shared.scripts.pacing import Observation

# Our clock and the provider's Date header agree this closely (the header has a resolution
# of one second): an HTTP date is then an instant on our clock, kept to the millisecond.
CLOCK_AGREEMENT_MS = 2000
# A stated wait from 2 s up to this long says one send per wait is the provider's rate now
# (its bucket's refill); a longer one is a block, not a rate.
MAX_RATE_WAIT_S = 60


def observe(
    result: SendResult, slot_ms: float, now: int, floor: float, no_advice_ms: float
) -> Observation:
    """What one send result tells the shared schedule (``no_advice_ms``: see block_until)."""
    throttled = result.outcome is Outcome.THROTTLED
    stated = stated_instant(result, now) if throttled else 0
    block = stated or (now + round(no_advice_ms) if throttled else 0)
    is_stated = stated > now
    if is_stated and (rate := advised_rate(result, stated, now)):
        return Observation(now, slot_ms, throttled, block, advised_rate=rate, stated=True)
    signal = result.rate
    if signal is not None and signal.reset_at is not None and signal.remaining is not None:
        reset_ms = to_ms(signal.reset_at)
        if signal.remaining < 1 and reset_ms > now:
            block = max(block, reset_ms)  # nothing left in this window: not one more call
        elif reset_ms > now:
            hint = max(floor, signal.remaining * 1000 / (reset_ms - now))
            return Observation(now, slot_ms, throttled, block, hint, reset_ms, stated=is_stated)
    return Observation(now, slot_ms, throttled, block, stated=is_stated)


def block_until(result: SendResult, now: int, no_advice_ms: float) -> int:
    """The instant a 429 says sending may resume: the one it states, else ``now`` plus
    ``no_advice_ms`` (the time a burst takes to refill at our rate)."""
    return stated_instant(result, now) or now + round(no_advice_ms)


def stated_instant(result: SendResult, now: int) -> int:
    """The instant a 429 states sending may resume (ms), or 0 when it states none.

    A window's reset (``X-RateLimit-Reset``, which SendGrid's adapter also renders as a
    delay rounded up to whole seconds) is that epoch, to the millisecond; an HTTP date (a
    Retry-After in any of its forms, or the date in Mailgun's text) names an instant:
    sending resumes exactly then, not at the next whole second of our clock. A delay in
    seconds is rounded up by the provider, so the real wait is somewhere in the last second
    before it: a delay of one second states nothing (at a fast rate the provider's bucket
    refills within it, and a full second would idle every sender; the cut rate spaces the
    next sends), a longer one, which only a slow provider gives, is waited in full (see
    ``_seconds_block``). A 429 that says nothing (Postmark's) states no instant: the
    caller pauses for a burst's refill and cuts the rate, so it is never hammered.
    """
    signal = result.rate
    if result.retry_source == Source.RATE_RESET and signal and signal.reset_at is not None:
        return max(0, to_ms(signal.reset_at))
    value = (result.retry_after or "").strip()
    if value.isdigit() and value.isascii():
        seconds = _seconds_block(int(value))
        return now + min(to_ms(seconds), MAX_DELAY_MS) if seconds else 0
    if value and (at := _date_instant(value, result.server_date, now)):
        return at
    if signal is not None and signal.reset_at is not None:
        return max(0, to_ms(signal.reset_at))
    return 0


def _seconds_block(seconds: int) -> int:
    """How long a wait of whole seconds blocks: one second less when it is one second (at
    a fast rate the provider's bucket refills within it, and a full second would idle every
    sender), the whole wait when longer (a slow provider: ending early costs a 429, ending
    late a fraction of a slot)."""
    return seconds if seconds >= 2 else 0


def advised_rate(result: SendResult, stated: int, now: int) -> float:
    """One send per stated wait of 2 s up to a minute (a Retry-After in any form, the date
    in Mailgun's text): the provider's bucket refills that slowly, and at our rate every
    other send would be a 429. A window's reset (``X-RateLimit-Reset``) is a pause, not a
    rate: the window opens whole again. 0 when the answer advises no rate."""
    if not result.retry_after or result.retry_source == Source.RATE_RESET:
        return 0.0
    wait = to_seconds(stated - now)
    return 1 / wait if 2 <= wait <= MAX_RATE_WAIT_S else 0.0


def _date_instant(value: str, server_date: str | None, now: int) -> int:
    today = to_datetime(now)
    when = parse_http_date(value, today)
    if when is None:
        return 0
    at = to_ms(when.timestamp())
    served = parse_http_date(server_date.strip(), today) if server_date else None
    if served is None:
        return at
    served_ms = to_ms(served.timestamp())
    if abs(served_ms - now) <= CLOCK_AGREEMENT_MS:
        return at
    # Clocks disagree: keep the provider's interval, measured from its own Date.
    return now + min(max(0, at - served_ms), MAX_DELAY_MS)


def declared_rate(signal: RateSignal | None) -> float | None:
    """The account's declared sustained rate (SES MaxSendRate), a ceiling for the pacer."""
    if signal is None or signal.account_rate is None or signal.account_rate <= 0:
        return None
    return signal.account_rate

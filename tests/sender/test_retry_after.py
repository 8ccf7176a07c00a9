"""Retry-After parsing (RFC 9110 section 10.2.3 and 5.6.7) and the backoff policy."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

from hypothesis import given
from hypothesis import strategies as st

from services.sender.policy import RetryPolicy, backoff_ms, decide
from shared.model import Outcome, State
from shared.retry_after import MAX_DELAY_MS, Source, parse, parse_http_date

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
RETRY_POLICY = RetryPolicy(
    max_attempts=6, backoff_base_ms=500, backoff_cap_ms=60_000, observation_window_ms=1000
)


def imf(when: datetime) -> str:
    return format_datetime(when, usegmt=True)


def rfc850(when: datetime) -> str:
    return when.strftime("%A, %d-%b-%y %H:%M:%S GMT")


def asctime(when: datetime) -> str:
    return when.strftime("%a %b ") + f"{when.day:>2}" + when.strftime(" %H:%M:%S %Y")


def test_the_three_date_forms_of_rfc_9110_mean_the_same_instant() -> None:
    when = datetime(1994, 11, 6, 8, 49, 37, tzinfo=UTC)
    assert imf(when) == "Sun, 06 Nov 1994 08:49:37 GMT"
    assert rfc850(when) == "Sunday, 06-Nov-94 08:49:37 GMT"
    assert asctime(when) == "Sun Nov  6 08:49:37 1994"
    for text in (imf(when), rfc850(when), asctime(when)):
        assert parse_http_date(text, NOW) == when


@given(st.integers(min_value=0, max_value=10**12))
def test_delay_seconds_any_size_is_a_bounded_delta(seconds: int) -> None:
    result = parse(str(seconds), NOW)
    assert result.source is Source.DELTA
    assert result.delay_ms == min(seconds * 1000, MAX_DELAY_MS)


@given(st.integers(min_value=1, max_value=86_400 * 30), st.sampled_from([imf, rfc850, asctime]))
def test_future_dates_in_every_form_give_their_delay(seconds: int, form: object) -> None:
    when = NOW + timedelta(seconds=seconds)
    result = parse(form(when), NOW)  # type: ignore[operator]
    assert result.source is Source.DATE
    assert result.delay_ms == seconds * 1000


@given(st.integers(min_value=0, max_value=10**6))
def test_past_dates_mean_now(seconds: int) -> None:
    assert parse(imf(NOW - timedelta(seconds=seconds)), NOW).delay_ms == 0


def test_clock_skew_is_measured_against_the_providers_own_date_header() -> None:
    provider_now = NOW + timedelta(minutes=10)  # their clock runs 10 minutes ahead
    advised = provider_now + timedelta(seconds=30)
    result = parse(imf(advised), NOW, server_date=imf(provider_now))
    assert result.delay_ms == 30_000


def test_whitespace_around_the_value_is_ignored() -> None:
    assert parse("  120 \t", NOW).delay_ms == 120_000
    assert parse(f" {imf(NOW + timedelta(seconds=5))} ", NOW).delay_ms == 5_000


def test_absent_and_empty_are_absent() -> None:
    assert parse(None, NOW).source is Source.ABSENT
    assert parse("   ", NOW).source is Source.ABSENT


@given(st.text(max_size=60))
def test_garbage_is_invalid_or_a_real_value_never_an_exception(text: str) -> None:
    result = parse(text, NOW)
    if result.source in (Source.INVALID, Source.ABSENT):
        assert result.delay_ms is None
    else:
        assert result.delay_ms is not None and 0 <= result.delay_ms <= MAX_DELAY_MS


def test_malformed_values_are_invalid() -> None:
    for text in ("-5", "1.5", "soon", "Sun, 32 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994"):
        assert parse(text, NOW).source is Source.INVALID, text


@given(st.integers(min_value=1, max_value=40), st.integers(min_value=0, max_value=2**32))
def test_backoff_is_full_jitter_under_the_capped_exponential(attempt: int, seed: int) -> None:
    delay = backoff_ms(attempt, RETRY_POLICY, random.Random(seed))
    ceiling = min(RETRY_POLICY.backoff_cap_ms, RETRY_POLICY.backoff_base_ms * 2 ** (attempt - 1))
    assert 1 <= delay <= ceiling


@given(st.integers(min_value=0, max_value=10**10), st.integers(min_value=1, max_value=5))
def test_a_throttled_attempt_never_lands_after_the_horizon(delay: int, attempt: int) -> None:
    now, horizon = 1_000_000, 1_000_000 + 3_600_000
    advice = parse(str(delay // 1000), NOW)
    final = decide(
        Outcome.THROTTLED,
        429,
        attempt=attempt,
        now=now,
        horizon_at=horizon,
        policy=RETRY_POLICY,
        rng=random.Random(0),
        retry_after=advice,
    )
    if final.next_state == State.DEFERRED:
        assert now <= final.retry_at < horizon
    else:
        assert (final.next_state, final.reason) == (State.EXHAUSTED, "horizon")


def test_invalid_retry_after_falls_back_to_backoff_and_records_why() -> None:
    final = decide(
        Outcome.THROTTLED,
        429,
        attempt=1,
        now=0,
        horizon_at=10**9,
        policy=RETRY_POLICY,
        rng=random.Random(1),
        retry_after=parse("soon", NOW),
    )
    assert final.next_state == State.DEFERRED
    assert final.retry_after_source == "invalid"
    assert "backoff" in final.reason


def test_invariant_2_cooldown_and_retry_policy_are_separate_settings() -> None:
    # RetryPolicy holds only the retry settings; the cooldown never reaches decide().
    final = decide(
        Outcome.TRANSIENT,
        503,
        attempt=6,
        now=0,
        horizon_at=10**9,
        policy=RETRY_POLICY,
        rng=random.Random(1),
    )
    assert (final.next_state, final.reason) == (State.EXHAUSTED, "max_attempts")
    assert "cooldown" not in RetryPolicy.__slots__


def test_only_ascii_digits_are_delay_seconds() -> None:
    assert parse("٣٠", NOW).source is Source.INVALID  # Arabic-Indic digits are not DIGIT

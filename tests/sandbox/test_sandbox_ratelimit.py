"""429s: an honest Retry-After in each form, on sends and on polling routes."""

from __future__ import annotations

import email.utils
import re
import time
from datetime import UTC

import pytest

from services.sandbox.ratelimit import FixedWindow, TokenBucket, send_bucket
from services.sandbox.retry_after import ROTATION, asctime_date, imf_fixdate, rfc850_date
from services.sandbox.settings import SandboxSettings, Schedule

DAY = r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
LONG_DAY = r"(Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)"
MONTH = r"(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
FORMS = {
    "delay-seconds": re.compile(r"^\d+$"),
    "imf-fixdate": re.compile(rf"^{DAY}, \d\d {MONTH} \d{{4}} \d\d:\d\d:\d\d GMT$"),
    "rfc850": re.compile(rf"^{LONG_DAY}, \d\d-{MONTH}-\d\d \d\d:\d\d:\d\d GMT$"),
    "asctime": re.compile(rf"^{DAY} {MONTH} [ \d]\d \d\d:\d\d:\d\d \d{{4}}$"),
}


def advised_wait(value: str, now: float) -> float:
    """Seconds until the advised time, the way a strict client reads the header."""
    if value.isdigit():
        return float(value)
    when = email.utils.parsedate_to_datetime(value)
    if when.tzinfo is None:  # asctime carries no zone; HTTP dates are always GMT
        when = when.replace(tzinfo=UTC)
    return when.timestamp() - now


def is_malformed(value: str) -> bool:
    if any(pattern.match(value) for pattern in FORMS.values()):
        return False
    try:
        email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return True
    return False


@pytest.mark.parametrize("form", ["delay-seconds", "imf-fixdate", "rfc850", "asctime"])
async def test_429_carries_retry_after_in_each_form(open_provider, form):
    async with open_provider(send_rate_per_second=0.25, send_burst=1, retry_after_form=form) as p:
        assert (await p.send(key="a")).status == 200
        throttled = await p.send(key="b")
        now = time.time()
    assert throttled.status == 429
    value = throttled.headers["Retry-After"]
    assert FORMS[form].match(value), value
    # One token per 4 s: the honest wait is ~4 s; 1 s resolution may only round it up.
    assert 3.0 <= advised_wait(value, now) <= 5.01


async def test_delay_seconds_is_the_wait_rounded_up(open_provider):
    async with open_provider(send_rate_per_second=0.2, send_burst=1) as p:
        await p.send(key="a")
        throttled = await p.send(key="b")
    assert throttled.headers["Retry-After"] == "5"


async def test_absent_and_malformed_forms(open_provider):
    async with open_provider(
        send_rate_per_second=0.1, send_burst=1, retry_after_form="absent"
    ) as p:
        await p.send(key="a")
        absent = await p.send(key="b")
        await p.control("POST", "/_sandbox/config", json={"retry_after_form": "malformed"})
        malformed = [(await p.send(key=f"m{i}")).headers["Retry-After"] for i in range(4)]
    assert absent.status == 429
    assert "Retry-After" not in absent.headers
    assert all(is_malformed(value) for value in malformed), malformed


async def test_changing_an_unrelated_setting_does_not_refill_the_bucket(open_provider):
    async with open_provider(send_rate_per_second=0.1, send_burst=1) as p:
        await p.send(key="a")
        await p.control("POST", "/_sandbox/config", json={"error_every": 0})
        unchanged = await p.send(key="b")
        await p.control("POST", "/_sandbox/config", json={"send_burst": 2})
        refilled = await p.send(key="c")
    assert (unchanged.status, refilled.status) == (429, 200)


async def test_rotate_cycles_through_every_form(open_provider):
    async with open_provider(
        send_rate_per_second=0.1, send_burst=1, retry_after_form="rotate"
    ) as p:
        await p.send(key="a")
        replies = [await p.send(key=f"r{i}") for i in range(len(ROTATION))]
    assert [r.status for r in replies] == [429] * len(ROTATION)
    seen = []
    for reply in replies:
        value = reply.headers.get("Retry-After")
        if value is None:
            seen.append("absent")
            continue
        matched = [form for form, pattern in FORMS.items() if pattern.match(value)]
        seen.append(matched[0] if matched else "malformed")
    assert seen == list(ROTATION)


async def test_polling_routes_are_rate_limited_with_retry_after(open_provider):
    async with open_provider(poll_rate_per_second=0.5, poll_burst=2) as p:
        statuses = [(await p.events()).status for _ in range(2)]
        throttled = await p.get("/email/messages", params={"idempotency_key": "x"})
        send = await p.send()  # sends have their own bucket
        stats = await p.stats()
    assert statuses == [200, 200]
    assert throttled.status == 429
    assert throttled.headers["Retry-After"] == "2"
    assert send.status == 200
    assert (stats["poll_throttled_total"], stats["send_throttled_total"]) == (1, 0)
    assert stats["throttled_total"] == 1


async def test_throttled_sends_are_counted_and_send_nothing(open_provider):
    async with open_provider(send_rate_per_second=1, send_burst=3) as p:
        statuses = [(await p.send(key=f"k{i}")).status for i in range(5)]
        stats = await p.stats()
    assert statuses == [200, 200, 200, 429, 429]
    assert stats["send_throttled_total"] == 2
    assert stats["emails_sent_total"] == 3
    assert stats["responses_by_status"] == {"200": 3, "429": 2}


def test_token_bucket_refills_at_rate_up_to_burst():
    now = [0.0]
    bucket = TokenBucket(rate=2.0, burst=2, clock=lambda: now[0])
    assert [bucket.take(), bucket.take()] == [0.0, 0.0]
    assert bucket.take() == pytest.approx(0.5)
    now[0] = 0.25
    assert bucket.take() == pytest.approx(0.25)
    now[0] = 10.0  # a long idle period refills only up to the burst
    assert [bucket.take(), bucket.take()] == [0.0, 0.0]
    assert bucket.take() > 0
    assert TokenBucket(rate=0.0, burst=1).take() == 0.0


def test_date_forms_render_the_rfc_examples():
    ts = 784111777  # RFC 9110's example instant: Sun, 06 Nov 1994 08:49:37 GMT
    assert imf_fixdate(ts) == "Sun, 06 Nov 1994 08:49:37 GMT"
    assert rfc850_date(ts) == "Sunday, 06-Nov-94 08:49:37 GMT"
    assert asctime_date(ts) == "Sun Nov  6 08:49:37 1994"


# -- a rate schedule and a shared quota ---------------------------------------------------
class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def sends_per_second(bucket: TokenBucket, clock: FakeClock, seconds: int) -> list[int]:
    """Accepted sends in each second, asking every millisecond."""
    counts = []
    for _ in range(seconds):
        accepted = 0
        for _ in range(1000):
            clock.now += 0.001
            accepted += bucket.take() == 0.0
        counts.append(accepted)
    return counts


def test_the_rate_schedule_follows_its_phases_from_the_first_send() -> None:
    clock = FakeClock()
    bucket = TokenBucket(Schedule.parse("100:2,50:2,100"), 2, clock)
    clock.now += 60  # idle time before the first send does not count
    counts = sends_per_second(bucket, clock, 6)
    assert [round(c, -1) for c in counts] == [100, 100, 50, 50, 100, 100]


def test_a_shared_quota_takes_its_share_of_the_rate() -> None:
    clock = FakeClock()
    schedule = Schedule.parse("0.5:2,0", below=1.0)
    bucket = TokenBucket(Schedule.constant(100), 2, clock, taken=schedule)
    counts = sends_per_second(bucket, clock, 4)
    assert [round(c, -1) for c in counts] == [50, 50, 100, 100]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("100:20,50", None),
        ("100", None),
        ("100:x,50", "not a number"),
        ("100,50", "value:seconds"),
        ("100:20,50:10", "open-ended"),
        ("0:5,100", "above 0"),
        ("-5:1,100", "above 0"),
    ],
)
def test_schedule_errors_name_the_phase(text: str, problem: str | None) -> None:
    if problem is None:
        Schedule.parse(text)
        return
    with pytest.raises(ValueError, match=problem):
        Schedule.parse(text)


def test_the_settings_read_the_schedule_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("RESETGATE_SANDBOX_SEND_RATE_SCHEDULE", "100:20,50:20,100")
    monkeypatch.setenv("RESETGATE_SANDBOX_SEND_SHARED_QUOTA", "0.3:10,0")
    settings = SandboxSettings()
    bucket = send_bucket(
        settings.send_rate_per_second,
        settings.send_rate_schedule,
        settings.send_shared_quota,
        settings.send_burst,
    )
    assert bucket.schedule == Schedule(((100.0, 20.0), (50.0, 20.0)), 100.0)
    assert bucket.taken == Schedule(((0.3, 10.0),), 0.0)
    monkeypatch.setenv("RESETGATE_SANDBOX_SEND_SHARED_QUOTA", "1.0")
    with pytest.raises(ValueError, match="under 1"):
        SandboxSettings()


def test_sendgrid_mode_limits_a_fixed_period_ending_on_a_whole_epoch_second() -> None:
    """SendGrid: "a fixed number of requests per refresh period", none more "for the
    remainder of the refresh period", X-RateLimit-Reset in epoch seconds
    (https://www.twilio.com/docs/sendgrid/api-reference/how-to-use-the-sendgrid-v3-api/rate-limits).
    """
    now = [1_000.25]
    window = FixedWindow(Schedule.constant(3.0), clock=lambda: now[0])
    assert [window.take() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert (window.limit, window.remaining, window.reset) == (3, 0, 1_001)
    assert window.take() == pytest.approx(0.75)  # until the period ends, not a refill
    now[0] = 1_001.0
    assert window.remaining == 3 and window.take() == 0.0


def test_the_sendgrid_sandbox_builds_a_fixed_window_and_the_others_a_bucket() -> None:
    assert isinstance(send_bucket(200, "", "", 10, fixed_window=True), FixedWindow)
    assert not isinstance(send_bucket(200, "", "", 10), FixedWindow)

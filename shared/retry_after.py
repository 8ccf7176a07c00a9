"""Retry-After (RFC 9110 section 10.2.3): delay-seconds or an HTTP-date in any of its forms.

HTTP-date (section 5.6.7) has one preferred form and two obsolete ones a recipient must
accept: IMF-fixdate ``Sun, 06 Nov 1994 08:49:37 GMT``, RFC 850
``Sunday, 06-Nov-94 08:49:37 GMT`` and asctime ``Sun Nov  6 08:49:37 1994``. Parsing is
done by hand, not strptime, so the process locale can never change the answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from shared.clock import to_ms


class Source(StrEnum):
    DELTA = "delta"
    DATE = "date"
    RATE_RESET = "x-ratelimit-reset"  # no Retry-After; the window's reset time (SendGrid)
    MESSAGE = "message"  # the wait stated in the answer's own text (Mailgun's "try again after")
    ABSENT = "absent"
    INVALID = "invalid"


@dataclass(frozen=True, slots=True)
class RetryAfter:
    source: Source
    delay_ms: int | None  # None when absent or invalid: the caller falls back to backoff


_MONTHS = {
    m: i
    for i, m in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1
    )
}
_DAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
_LONG_DAY = r"(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)"
_MON = r"(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_TIME = r"(\d{2}):(\d{2}):(\d{2})"
_IMF = re.compile(rf"{_DAY}, (\d{{2}}) {_MON} (\d{{4}}) {_TIME} GMT", re.ASCII)
_RFC850 = re.compile(rf"{_LONG_DAY}, (\d{{2}})-{_MON}-(\d{{2}}) {_TIME} GMT", re.ASCII)
_ASCTIME = re.compile(rf"{_DAY} {_MON} ([ \d]\d) {_TIME} (\d{{4}})", re.ASCII)
_DELTA = re.compile(r"\d+", re.ASCII)
# Delays beyond this are treated as "longer than any horizon"; keeps arithmetic bounded.
MAX_DELAY_MS = to_ms(400 * 24 * 3600)


def parse_http_date(value: str, now: datetime) -> datetime | None:
    """Any of the three HTTP-date forms, or None."""
    if m := _IMF.fullmatch(value):
        day, mon, year, hh, mm, ss = m.groups()
    elif m := _RFC850.fullmatch(value):
        day, mon, yy, hh, mm, ss = m.groups()
        # RFC 9110: a two-digit year more than 50 years ahead is in the past century.
        year = str(_two_digit_year(int(yy), now.year))
    elif m := _ASCTIME.fullmatch(value):
        mon, day, hh, mm, ss, year = m.groups()
    else:
        return None
    try:
        return datetime(int(year), _MONTHS[mon], int(day), int(hh), int(mm), int(ss), tzinfo=UTC)
    except ValueError:  # 31 Feb, 25:00:00 ...
        return None


def _two_digit_year(yy: int, this_year: int) -> int:
    year = this_year - this_year % 100 + yy
    return year - 100 if year > this_year + 50 else year


def parse(value: str | None, now: datetime, server_date: str | None = None) -> RetryAfter:
    """Interpret a Retry-After header relative to ``now``.

    A date is measured against the response's own ``Date`` header when it has one, so a
    provider whose clock is skewed from ours still gets the delay it meant. Dates in the
    past mean "now".
    """
    if value is None or not value.strip():
        return RetryAfter(Source.ABSENT, None)
    text = value.strip()
    if _DELTA.fullmatch(text):
        return RetryAfter(Source.DELTA, min(to_ms(int(text)), MAX_DELAY_MS))
    when = parse_http_date(text, now)
    if when is None:
        return RetryAfter(Source.INVALID, None)
    reference = parse_http_date(server_date.strip(), now) if server_date else None
    delay = (when - (reference or now)).total_seconds()
    return RetryAfter(Source.DATE, min(max(0, to_ms(delay)), MAX_DELAY_MS))

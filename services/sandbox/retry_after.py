"""Retry-After values in every form RFC 9110 allows, plus the broken ones seen in the wild."""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterator

from services.sandbox.settings import RetryAfterForm

# Fixed English names: HTTP dates must not depend on the process locale.
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_LONG_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")

# Values a careless provider sends; none is delay-seconds and none parses as a date.
_MALFORMED = ("soon", "1.5", "-3", "Mon, 32 Foo 2024 99:99:99 GMT")

ROTATION: tuple[RetryAfterForm, ...] = (
    "delay-seconds",
    "imf-fixdate",
    "rfc850",
    "asctime",
    "absent",
    "malformed",
)


def imf_fixdate(ts: float) -> str:
    t = time.gmtime(ts)
    return (
        f"{_DAYS[t.tm_wday]}, {t.tm_mday:02d} {_MONTHS[t.tm_mon - 1]} {t.tm_year} "
        f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} GMT"
    )


def rfc850_date(ts: float) -> str:
    t = time.gmtime(ts)
    return (
        f"{_LONG_DAYS[t.tm_wday]}, {t.tm_mday:02d}-{_MONTHS[t.tm_mon - 1]}-{t.tm_year % 100:02d} "
        f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} GMT"
    )


def asctime_date(ts: float) -> str:
    t = time.gmtime(ts)
    return (
        f"{_DAYS[t.tm_wday]} {_MONTHS[t.tm_mon - 1]} {t.tm_mday:>2d} "
        f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} {t.tm_year}"
    )


class RetryAfterFormatter:
    """Renders the wait in the configured form; ``rotate`` cycles through all of them."""

    def __init__(self, form: RetryAfterForm) -> None:
        self.form = form
        self._rotation: Iterator[RetryAfterForm] = itertools.cycle(ROTATION)
        self._malformed: Iterator[str] = itertools.cycle(_MALFORMED)

    def header(self, wait_seconds: float, now: float | None = None) -> dict[str, str]:
        """Headers for a 429: empty when the chosen form is ``absent``."""
        form = next(self._rotation) if self.form == "rotate" else self.form
        value = self._render(form, max(wait_seconds, 0.0), time.time() if now is None else now)
        return {} if value is None else {"Retry-After": value}

    def _render(self, form: RetryAfterForm, wait: float, now: float) -> str | None:
        # Never advise a time earlier than the honest one: round the wait up to 1 s.
        if form == "delay-seconds":
            return str(max(1, math.ceil(wait)))
        if form == "absent":
            return None
        if form == "malformed":
            return next(self._malformed)
        when = math.ceil(now + wait)
        if form == "imf-fixdate":
            return imf_fixdate(when)
        if form == "rfc850":
            return rfc850_date(when)
        return asctime_date(when)

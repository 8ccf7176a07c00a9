"""What one provider answer says about its rate limit, beside Retry-After.

Adapters build a ``RateSignal`` from whatever the provider sends (``X-RateLimit-Limit`` /
``-Remaining`` / ``-Reset`` on SendGrid and many HTTP APIs, an account quota for SES) and
attach it to their send outcome; the sender's pacer is the only consumer. Every field is
optional: a provider that says nothing yields ``None``, never zeros.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from shared.clock import to_seconds
from shared.retry_after import MAX_DELAY_MS

# X-RateLimit-Reset is an epoch (SendGrid) on some APIs and a delay in seconds on others:
# a value this large can only be an epoch.
_EPOCH_THRESHOLD = 1_000_000_000


@dataclass(frozen=True, slots=True)
class RateSignal:
    limit: float | None = None  # requests allowed per window
    remaining: float | None = None  # requests left in the current window
    reset_at: float | None = None  # epoch seconds when the window resets
    # The account's declared sustained send rate (sends/s; SES MaxSendRate): a ceiling.
    account_rate: float | None = None


# A window never holds more requests than this: a larger count only means "plenty".
MAX_COUNT = 1e9
# The latest instant a reset may name, as Retry-After is bounded (shared.retry_after).
MAX_RESET_SECONDS = to_seconds(MAX_DELAY_MS)


def number(value: str | None, maximum: float) -> float | None:
    """A number a provider sent, or None when it is none (text, NaN, an infinity, below 0);
    bounded at ``maximum``, so no arithmetic on it can overflow ("1e308", "-inf")."""
    if value is None:
        return None
    try:
        parsed = float(value.strip())
    except ValueError:
        return None
    return min(parsed, maximum) if math.isfinite(parsed) and parsed >= 0 else None


def reset_epoch(value: str | None, now: float) -> float | None:
    """``X-RateLimit-Reset`` as epoch seconds (a small value is a delay from ``now``), at
    most ``MAX_RESET_SECONDS`` ahead; None when it is not a usable number."""
    reset = number(value, now + MAX_RESET_SECONDS)
    if reset is not None and reset < _EPOCH_THRESHOLD:
        reset = now + reset
    return reset


def retry_in(reset: str | None, now: float) -> str | None:
    """An epoch ``X-RateLimit-Reset`` (SendGrid, Mailgun) as a Retry-After delay in whole
    seconds, or None when unusable (parsed as every provider number is: "-inf", "nan" or
    "1e308" never raise)."""
    at = number(reset, now + MAX_RESET_SECONDS)
    return None if at is None else str(max(0, math.ceil(at - now)))


def from_headers(headers: Mapping[str, str], now: float) -> RateSignal | None:
    """The ``X-RateLimit-*`` headers of one answer, or None when it carries none usable."""
    limit = number(headers.get("X-RateLimit-Limit"), MAX_COUNT)
    remaining = number(headers.get("X-RateLimit-Remaining"), MAX_COUNT)
    reset = reset_epoch(headers.get("X-RateLimit-Reset"), now)
    if limit is None and remaining is None and reset is None:
        return None
    return RateSignal(limit, remaining, reset)

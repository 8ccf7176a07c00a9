"""What one provider answer says about its rate limit, beside Retry-After.

Adapters build a ``RateSignal`` from whatever the provider sends (``X-RateLimit-Limit`` /
``-Remaining`` / ``-Reset`` on SendGrid and many HTTP APIs, an account quota for SES) and
attach it to their send outcome; the sender's pacer is the only consumer. Every field is
optional: a provider that says nothing yields ``None``, never zeros.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

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


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if number >= 0 and number == number and number != float("inf") else None


def from_headers(headers: Mapping[str, str], now: float) -> RateSignal | None:
    """The ``X-RateLimit-*`` headers of one answer, or None when it carries none usable."""
    limit = _number(headers.get("X-RateLimit-Limit"))
    remaining = _number(headers.get("X-RateLimit-Remaining"))
    reset = _number(headers.get("X-RateLimit-Reset"))
    if reset is not None and reset < _EPOCH_THRESHOLD:
        reset = now + reset
    if limit is None and remaining is None and reset is None:
        return None
    return RateSignal(limit, remaining, reset)

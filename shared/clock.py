"""Wall-clock milliseconds, the unit every score and timestamp in the store uses."""

from __future__ import annotations

import time


def to_ms(seconds: float) -> int:
    """Seconds (a setting, a clock reading) as the store's whole milliseconds, truncated: the
    one conversion, so an int setting keeps its exact value and a float one loses only what
    a millisecond cannot hold."""
    return int(seconds * 1000)


def now_ms() -> int:
    return to_ms(time.time())

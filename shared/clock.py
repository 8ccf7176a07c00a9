"""Wall-clock milliseconds, the unit every score and timestamp in the store uses."""

from __future__ import annotations

import time


def now_ms() -> int:
    return int(time.time() * 1000)

"""Wall-clock milliseconds, the unit every score and timestamp in the store uses."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import overload


def to_ms(seconds: float) -> int:
    """Seconds (a setting, a clock reading) as the store's whole milliseconds, truncated: the
    one conversion, so an int setting keeps its exact value and a float one loses only what
    a millisecond cannot hold."""
    return int(seconds * 1000)


class InMs:
    """A settings class's ``<name>_ms``: its ``<name>_seconds`` in the store's unit, read
    through :func:`to_ms` (``lease_ms = InMs()`` beside a ``lease_seconds`` field)."""

    __slots__ = ("seconds",)

    def __set_name__(self, owner: type, name: str) -> None:
        self.seconds = name.removesuffix("_ms") + "_seconds"

    @overload
    def __get__(self, settings: None, owner: type) -> InMs: ...
    @overload
    def __get__(self, settings: object, owner: type | None = None) -> int: ...
    def __get__(self, settings: object | None, owner: type | None = None) -> InMs | int:
        return self if settings is None else to_ms(getattr(settings, self.seconds))


def to_seconds(ms: float) -> float:
    """The store's milliseconds as seconds: a sleep, a metric, an age a person reads."""
    return ms / 1000


def to_datetime(ms: float) -> datetime:
    """The store's milliseconds as a UTC datetime."""
    return datetime.fromtimestamp(to_seconds(ms), UTC)


def from_datetime(at: datetime) -> int:
    """An aware datetime as the store's milliseconds, rounded: the inverse of
    :func:`to_datetime` (a float timestamp may fall a hair below the millisecond it holds)."""
    return round(at.timestamp() * 1000)


def now_ms() -> int:
    return to_ms(time.time())

"""Identifiers: time-ordered, random, and safe to show to support (they carry no secret)."""

from __future__ import annotations

import secrets
import time

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def ulid(now_ms: int | None = None) -> str:
    """A ULID: 48 bits of milliseconds then 80 random bits, Crockford base32, 26 chars."""
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    value = (ms << 80) | secrets.randbits(80)
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def operation_id(partition: int, now_ms: int | None = None) -> str:
    """``op-<partition>-<ulid>``: the partition travels with the id."""
    return f"op-{partition}-{ulid(now_ms)}"


def attempt_id() -> str:
    return "at-" + ulid()


def case_id() -> str:
    return "case-" + ulid()

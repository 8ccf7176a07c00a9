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


def ulid_ms(value: str) -> int:
    """The milliseconds a ULID was made at (its first 10 characters)."""
    ms = 0
    for char in value[:10]:
        ms = ms * 32 + _CROCKFORD.index(char)
    return ms


def operation_id(partition: int, now_ms: int | None = None) -> str:
    """``op-<partition>-<ulid>``: the partition travels with the id."""
    return f"op-{partition}-{ulid(now_ms)}"


def operation_created_ms(operation_id: str) -> int:
    """When the operation was created: its id carries it, so the store need not."""
    return ulid_ms(operation_id.rsplit("-", 1)[-1])


def attempt_id() -> str:
    return "at-" + ulid()


def case_id() -> str:
    return "case-" + ulid()

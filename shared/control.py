"""Operator switches shared by every replica: partition pauses, the provider pause,
the provider each partition sends through, and a provider switch in progress.

The provider pause (field ``auth_paused:<provider>``, named when credentials were its only
cause) is one JSON dict: ``since`` (ms), ``kind`` (:class:`PauseKind`), ``reason`` (the
provider's own words, bounded and sanitised), ``status`` and ``key`` (the fingerprint of
the key in use); other fields may be added (a pause that lifts itself names its ``until``).

They live in one small hash (``rg:control``) that each sender re-reads every second, so a
pause takes effect everywhere within about a second and survives restarts. Of the three
modules on-call's tools read, this is the one that writes: ``shared.status`` reports where
partitions and providers stand, ``shared.operation_views`` shows concrete operations.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from shared import clock, codec
from shared.keys import CONTROL
from shared.logging import cut, printable, scrub
from shared.redis import RedisClient

SWITCH = "switch"  # the provider switch in progress (JSON)
PREVIOUS = "provider_previous"  # the assignment before the last completed switch (JSON)
PAUSED_PROVIDER = "auth_paused:"  # + provider name: the provider pause (JSON)
MAX_REASON = 200
# Linear: a match starts only where a run starts (the look-behind), and a run's domain part
# takes the whole rest of it, so no match ends beside a character that could begin another.
_ADDRESS = re.compile(r"(?<![^\s<>\"'@])[^\s<>\"'@]+@[^\s<>\"'@]+")
# Token-shaped: a run of 20 or more key characters with a digit in it (an API key, a
# Postmark server token, a message id that grants something); words and names have none.
_KEYISH = re.compile(r"(?<![A-Za-z0-9_\-+/=.])[A-Za-z0-9_\-+/=.]{20,}")


class PauseKind(StrEnum):
    """Why every send through a provider stops: until an operator resumes it, or (a quota)
    until its ``until`` passes."""

    CREDENTIALS = "credentials"  # 401/403 and the like: our key is rejected
    ACCOUNT = "account"  # a documented refusal of the whole account or domain
    REFUSALS = "refusals"  # K distinct operations refused alike: the provider refuses us
    QUOTA = "quota"  # a daily quota used up: the pause lifts itself at its ``until`` (ms)


@dataclass(frozen=True, slots=True)
class ControlState:
    paused: frozenset[int]
    auth_paused: dict[str, dict[str, object]]
    # partition -> {"since": ms, "reason": text}: who paused it and why, for on-call's views
    paused_notes: dict[int, dict[str, Any]] = field(default_factory=dict)
    # partition -> provider name; a partition not listed is served by the first configured
    providers: dict[int, str] = field(default_factory=dict)
    # the switch in progress (see shared.switch), or None
    switch: dict[str, Any] | None = None

    def provider_for(self, partition: int, default: str) -> str:
        return self.providers.get(partition, default)


def key_fingerprint(api_key: str) -> str:
    """Which key was rejected, without storing the key: a rotated key lifts the pause."""
    return hashlib.sha256(api_key.encode()).hexdigest()[:12]


async def quota_pause(
    client: RedisClient, provider: str, until: int, reason: str, fingerprint: str
) -> None:
    """Pause sending through ``provider`` until ``until`` (ms): its quota is used up until
    its window rolls over (``shared.quota``). The sender lifts it then, by itself."""
    await provider_pause(
        client, provider, PauseKind.QUOTA, reason, status=429, fingerprint=fingerprint, until=until
    )


def pause_over(note: dict[str, object], now: int) -> bool:
    """True when a pause that lifts itself (it has an ``until``) has reached it."""
    until = note.get("until")
    return isinstance(until, int) and 0 < until <= now


async def read(client: RedisClient) -> ControlState:
    raw = await client.hgetall(CONTROL)
    notes = {int(str(k)[7:]): _note(v) for k, v in raw.items() if str(k).startswith("paused:")}
    paused = frozenset(notes)
    auth = {
        str(k)[len(PAUSED_PROVIDER) :]: _note(v)
        for k, v in raw.items()
        if str(k).startswith(PAUSED_PROVIDER)
    }
    providers = {int(str(k)[9:]): str(v) for k, v in raw.items() if str(k).startswith("provider:")}
    switch = _note(raw[SWITCH]) if SWITCH in raw else None
    return ControlState(paused, auth, notes, providers, switch or None)


def _note(raw: bytes | str) -> dict[str, Any]:
    try:
        value = codec.loads(raw)
    except codec.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


async def pause_partitions(client: RedisClient, partitions: list[int], reason: str) -> None:
    note = codec.dumps_str({"since": clock.now_ms(), "reason": reason[:200]})
    await client.hset(CONTROL, mapping={f"paused:{p}": note for p in partitions})


async def resume_partitions(client: RedisClient, partitions: list[int]) -> None:
    await client.hdel(CONTROL, *(f"paused:{p}" for p in partitions))


def sanitise(text: str) -> str:
    """A provider's words, safe to store and print: cut to a few times ``MAX_REASON`` before
    any pattern runs, then no control or bidi characters, no address (a refusal may quote
    one), no URL and nothing token-shaped (a pause reason is shown in the console and the
    CLI), at most ``MAX_REASON`` characters."""
    text = scrub(_ADDRESS.sub("[address]", printable(cut(text, 4 * MAX_REASON))))
    text = _KEYISH.sub(_keyish, text)
    return " ".join(text.split())[:MAX_REASON]


def _keyish(match: re.Match[str]) -> str:
    run = match.group()
    return "[token]" if any(c.isdigit() for c in run) else run


async def provider_pause(
    client: RedisClient,
    provider: str,
    kind: PauseKind,
    reason: str,
    *,
    status: int = 0,
    fingerprint: str = "",
    until: int = 0,
) -> None:
    """``until`` (ms, kind quota): when the pause lifts by itself; 0: an operator lifts it."""
    note: dict[str, object] = {
        "since": clock.now_ms(),
        "kind": str(kind),
        "reason": sanitise(reason),
        "status": status,
        "key": fingerprint,
    }
    if until:
        note["until"] = until
    await client.hset(CONTROL, PAUSED_PROVIDER + provider, codec.dumps_str(note))


async def refusals_pause(
    client: RedisClient, provider: str, reason: str, held: list[str], fingerprint: str
) -> bool:
    """The refusals guard's trip, one atomic decision (HSETNX): the pause is written only if
    the provider is not paused already, so a trip never overwrites another sender's pause
    or reason. ``held``: the operations that tripped it (held for review; the resume sends
    the first as its probe). True when this trip wrote the pause."""
    note = {
        "since": clock.now_ms(),
        "kind": str(PauseKind.REFUSALS),
        "reason": sanitise(reason),
        "status": 0,
        "key": fingerprint,
        "held": held,
    }
    return bool(await client.hsetnx(CONTROL, PAUSED_PROVIDER + provider, codec.dumps_str(note)))


def held_for_probe(note: dict[str, object] | None) -> list[str]:
    """The operations a refusals pause holds for review, in the order they were refused."""
    held = (note or {}).get("held")
    return [str(h) for h in held] if isinstance(held, list) else []


async def auth_pause(client: RedisClient, provider: str, status: int, fingerprint: str) -> None:
    await provider_pause(
        client,
        provider,
        PauseKind.CREDENTIALS,
        f"credentials rejected (HTTP {status})",
        status=status,
        fingerprint=fingerprint,
    )


def pause_kind(note: dict[str, object]) -> str:
    """A pause's kind; a note that has none is a credentials pause, so a store holding such
    notes keeps reading them as it always has."""
    return str(note.get("kind") or PauseKind.CREDENTIALS)


async def auth_resume(client: RedisClient, provider: str) -> bool:
    """Lift the provider pause, whatever its kind."""
    return bool(await client.hdel(CONTROL, PAUSED_PROVIDER + provider))

"""Operator switches shared by every replica: partition pauses, the provider auth pause,
the provider each partition sends through, and a provider switch in progress.

They live in one small hash (``rg:control``) that each sender re-reads every second, so a
pause takes effect everywhere within about a second and survives restarts.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from shared import clock, codec
from shared.keys import CONTROL
from shared.redis import RedisClient

SWITCH = "switch"  # the provider switch in progress (JSON)
PREVIOUS = "provider_previous"  # the assignment before the last completed switch (JSON)


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


QUOTA = "quota"  # the kind of a provider pause that lifts itself at its ``until`` (ms)


async def quota_pause(
    client: RedisClient, provider: str, until: int, reason: str, fingerprint: str
) -> None:
    """Pause sending through ``provider`` until ``until`` (ms): its quota is used up until
    its window rolls over (``shared.quota``). The sender lifts it then, by itself."""
    note = {"since": clock.now_ms(), "kind": QUOTA, "reason": reason[:200], "until": until,
            "status": 429, "key": fingerprint}  # fmt: skip
    await client.hset(CONTROL, f"auth_paused:{provider}", codec.dumps_str(note))


def pause_over(note: dict[str, object], now: int) -> bool:
    """True when a pause that lifts itself (it has an ``until``) has reached it."""
    until = note.get("until")
    return isinstance(until, int) and 0 < until <= now


async def read(client: RedisClient) -> ControlState:
    raw = await client.hgetall(CONTROL)
    notes = {int(str(k)[7:]): _note(v) for k, v in raw.items() if str(k).startswith("paused:")}
    paused = frozenset(notes)
    auth = {
        str(k)[12:]: codec.loads(v) for k, v in raw.items() if str(k).startswith("auth_paused:")
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


async def auth_pause(client: RedisClient, provider: str, status: int, fingerprint: str) -> None:
    note = {"since": clock.now_ms(), "status": status, "key": fingerprint}
    await client.hset(CONTROL, f"auth_paused:{provider}", codec.dumps_str(note))


async def auth_resume(client: RedisClient, provider: str) -> bool:
    return bool(await client.hdel(CONTROL, f"auth_paused:{provider}"))

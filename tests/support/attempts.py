"""Script calls tests make directly, with the arguments no test varies filled in."""

from __future__ import annotations

from redis.asyncio import Redis

from shared.scripts.attempts import BeginAttempt, Begun


async def begin(
    redis: Redis, op: str, attempt_id: str, now: int, *, lease_ms: int = 1, provider: str = ""
) -> Begun:
    """One begin of ``op``: what a test varies is the attempt, its clock and the provider."""
    return await BeginAttempt(
        operation_id=op,
        attempt_id=attempt_id,
        now=now,
        lease_ms=lease_ms,
        provider=provider,
        max_attempts=6,
        consumer="t",
        entry_id="",
        retention_ms=60_000,
    ).run(redis)

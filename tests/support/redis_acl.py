"""A Redis user as managed services hand out: everything but CONFIG (and other admin commands)."""

from __future__ import annotations

import secrets

from redis.asyncio import Redis

from services.ctl.embedded import RedisServer


async def url_without_config(server: RedisServer) -> str:
    """A URL for ``server`` as a user that CONFIG GET answers with NOPERM."""
    password = secrets.token_hex(8)
    admin = Redis.from_url(server.url)
    await admin.acl_setuser(
        "app",
        enabled=True,
        passwords=[f"+{password}"],
        keys=["*"],
        channels=["*"],
        commands=["+@all", "-@admin", "-config"],
    )
    await admin.aclose()
    return server.url.replace("redis://", f"redis://app:{password}@")

"""Lua scripts, one per file, each with a typed async wrapper.

A script is sent by SHA (computed up front); on NOSCRIPT it is loaded and the call retried,
which also covers a Redis restart or a failover to a replica without the script cache.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from typing import Any

from redis.exceptions import NoScriptError

from shared.redis import RedisClient


class Script:
    def __init__(self, name: str) -> None:
        self.name = name
        self.source = resources.files(__package__).joinpath(f"{name}.lua").read_text()
        self.sha = hashlib.sha1(self.source.encode(), usedforsecurity=False).hexdigest()

    async def __call__(
        self, client: RedisClient, keys: list[str], args: list[str | int | float]
    ) -> Any:
        try:
            return await client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            await client.script_load(self.source)
            return await client.evalsha(self.sha, len(keys), *keys, *args)

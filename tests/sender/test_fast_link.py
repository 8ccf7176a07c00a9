"""The sender's wiring puts each email's Redis commands on FastRedis's pipelined link
(shared/fastredis.py) on a standalone Redis, and RESETGATE_FAST_REDIS=false keeps plain
redis-py: the way out if a redis-py upgrade breaks the link must work for the sender too."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from services.ctl.embedded import RedisServer
from services.sender.app import wire
from services.sender.worker import Sender
from shared.fastredis import FastRedis
from shared.redis import create_client
from tests.conftest import CLUSTER
from tests.sender.conftest import sender_settings

pytestmark = pytest.mark.skipif(CLUSTER, reason="FastRedis is standalone Redis only")


@pytest.mark.parametrize("fast", [True, False])
async def test_each_email_goes_over_the_link_the_setting_names(
    redis: Redis, redis_server: RedisServer, sandbox_url: str, fast: bool
) -> None:
    settings = sender_settings(redis_server.url, sandbox_url, fast_redis=fast)
    client = create_client(settings)
    try:
        async with wire(settings, client) as wiring:
            senders = {getattr(w, "__self__", None) for w in wiring.workers}
            sender = next(s for s in senders if isinstance(s, Sender))
            runner = sender.runner
            used = {
                sender.client,
                runner.client,
                runner.pacer.client,
                runner.replicas.client,
                getattr(runner.messages.directory, "client", sender.client),
            }
            assert all(isinstance(c, FastRedis) is fast for c in used), used
            assert (client in used) is not fast  # off: the plain client, as before
            assert await wiring.readiness() == {"redis": True}
    finally:
        await client.aclose()

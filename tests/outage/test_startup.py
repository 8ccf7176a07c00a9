"""A service that starts while Redis is paused for writes (what Sentinel and Cluster do for a
failover, with CLIENT PAUSE WRITE) waits and then starts: it does not exit.

connect() only proves that Redis answered a PING. The sender and the router then create
their consumer groups (a write); if Redis stops taking writes or goes away in between, the
startup step used to raise and the process exited - a restart (a crash loop, for as long as
the blip lasts) instead of a wait.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from services.ctl.embedded import RedisServer
from services.sandbox.testing import SANDBOX_API_KEY
from shared.keys import CONTACT_FORMS, PartitionKeys
from tests.conftest import TEST_TOKEN_KEYS
from tests.support.processes import ServiceProcess

PAUSE_MS = 10_000  # longer than the client's own retries (4 tries of a 1 s timeout)


@pytest.fixture
def server() -> Iterator[RedisServer]:
    started = RedisServer().start()
    yield started
    started.stop()


@pytest.mark.timeout(90)
@pytest.mark.parametrize("name", ["sender", "router"])
async def test_a_service_starting_during_a_write_pause_waits_for_it(
    tmp_path: Path, server: RedisServer, name: str
) -> None:
    env = {
        "RESETGATE_REDIS_URL": server.url,
        "RESETGATE_REDIS_TIMEOUT_SECONDS": "1",
        "RESETGATE_TOKEN_KEYS": TEST_TOKEN_KEYS,
        "RESETGATE_PROVIDER_API_KEY": SANDBOX_API_KEY,
        "RESETGATE_PARTITIONS": "2",
    }
    service = ServiceProcess(name, env, tmp_path)
    redis.Redis(port=server.port).client_pause(PAUSE_MS, all=False)  # writes only
    try:
        await service.start(timeout=60)  # raises if the process exits instead
        assert service.running
        assert "redis not ready for startup yet" in service.logs()
        groups = redis.Redis(port=server.port, decode_responses=True)
        key = PartitionKeys(0).send if name == "sender" else CONTACT_FORMS
        assert groups.xinfo_groups(key), "the consumer group was created after the pause"
    finally:
        await service.stop()

"""A service that starts while Redis is paused for writes (what Sentinel and Cluster do for a
failover, with CLIENT PAUSE WRITE) waits and then starts: it does not exit.

connect() only proves that Redis answered a PING. The sender and the router then create
their consumer groups (a write); if Redis stops taking writes or goes away in between, the
startup step used to raise and the process exited - a restart (a crash loop, for as long as
the blip lasts) instead of a wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from services.ctl.embedded import RedisServer, free_port
from shared.keys import CONTACT_FORMS, PartitionKeys
from shared.redis import until_done
from tests.conftest import TEST_TOKEN_KEYS
from tests.support.processes import START_TIMEOUT, ServiceProcess
from tests.support.sandbox import SANDBOX_API_KEY

PAUSE_MS = 120_000  # lifted by the test once the service has been seen waiting


@pytest.fixture
def server() -> Iterator[RedisServer]:
    started = RedisServer().start()
    yield started
    started.stop()


@pytest.mark.timeout(150)
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
    admin = redis.Redis(port=server.port, decode_responses=True)
    admin.client_pause(PAUSE_MS, all=False)  # writes only
    # The pause ends when the service has been seen waiting in it, not after a fixed time
    # that a slow start on a loaded machine could outlast.
    starting = asyncio.create_task(service.start(timeout=120))  # raises if the process exits
    try:
        async with asyncio.timeout(90):
            while "redis not ready for startup yet" not in service.logs():
                assert not starting.done(), "ready during the pause"
                await asyncio.sleep(0.1)
        assert service.running
        admin.client_unpause()
        await starting
        key = PartitionKeys(0).send if name == "sender" else CONTACT_FORMS
        assert admin.xinfo_groups(key), "the consumer group was created after the pause"
    finally:
        admin.client_unpause()
        if not starting.done():
            starting.cancel()
        await asyncio.gather(starting, return_exceptions=True)
        await service.stop()


async def test_a_service_names_the_unreachable_redis_in_its_first_line(tmp_path: Path) -> None:
    """Issue 15 item 6: the first "redis not ready" line says where, and there is one line
    per ten tries rather than one per try; giving up is one line naming it too."""
    nowhere = f"redis://127.0.0.1:{free_port()}/0"
    env = {
        "RESETGATE_REDIS_URL": nowhere,
        "RESETGATE_TOKEN_KEYS": TEST_TOKEN_KEYS,
        "RESETGATE_INTERNAL_API_TOKEN": "startup-internal-token-0123456789",
    }
    service = ServiceProcess("admission", env, tmp_path)
    with pytest.raises(RuntimeError, match="not ready"):
        await service.start(timeout=8)
    # Eight seconds of tries (the first line, then none for ten tries); a loaded machine
    # may take longer than that just to import the service, so wait for its first line.
    for _ in range(int(START_TIMEOUT / 0.1)):
        if "redis not ready" in service.logs():
            break
        await asyncio.sleep(0.1)
    await service.stop()
    records = service.log_records()
    waiting = [r for r in records if r.get("msg") == "redis not ready for startup yet"]
    assert waiting and waiting[0]["redis"] == nowhere
    assert len(waiting) <= 2, "one line per ten tries, not one per try"
    assert "Traceback" not in service.logs()


async def test_giving_up_on_redis_is_one_line_naming_it() -> None:
    async def refused() -> None:
        raise ConnectionRefusedError("refused")

    with pytest.raises(SystemExit) as stopped:
        await until_done(refused, "connect", attempts=2, target="redis://127.0.0.1:1/0")
    assert str(stopped.value.code) == (
        "redis unreachable at redis://127.0.0.1:1/0 at start (connect, 2 tries): "
        "check RESETGATE_REDIS_URL"
    )

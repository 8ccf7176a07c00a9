"""A Redis that is loading its dataset (after a restart, or a replica's full sync) answers
every data command with BusyLoadingError ("LOADING Redis is loading the dataset in
memory"). Every service treats that as "not ready yet": /readyz answers 503 while Redis
loads and 200 after, and no process exits or logs a traceback.

Loading is slowed with Redis' own ``key-load-delay`` (microseconds per key) so the window is
seconds long, not milliseconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import redis

from services.ctl.embedded import RedisServer
from tests.chaos.crashable_redis import wait_loaded
from tests.conftest import TEST_TOKEN_KEYS
from tests.support.processes import START_TIMEOUT, Processes
from tests.support.sandbox import SANDBOX_API_KEY, run_sandbox

SERVICES = ("admission", "sender", "poller", "router")
KEYS = 40_000
KEY_LOAD_DELAY_US = 200  # ~8 s of loading


class SlowLoadingRedis(RedisServer):
    def __init__(self) -> None:
        super().__init__(appendonly=True, appendfsync="everysec")

    def args(self) -> list[str]:
        return [*super().args(), "--key-load-delay", str(KEY_LOAD_DELAY_US)]


@pytest.fixture
async def loading_redis() -> AsyncIterator[RedisServer]:
    server = RedisServer.start(SlowLoadingRedis())
    with redis.Redis(port=server.port) as client:
        for start in range(0, KEYS, 5000):
            with client.pipeline(transaction=False) as pipe:
                for i in range(start, start + 5000):
                    pipe.set(f"filler:{i}", "x")
                pipe.execute()
    yield server
    server.stop()


async def readiness(session: aiohttp.ClientSession, url: str) -> int:
    try:
        async with session.get(url + "/readyz") as response:
            return response.status
    except (aiohttp.ClientError, TimeoutError):
        return 0


def loading(port: int) -> bool:
    """Whether Redis says it is loading; False while nothing answers (stopped, starting)."""
    try:
        with redis.Redis(port=port, socket_timeout=2) as client:
            return bool(int(client.info("persistence")["loading"]))
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
        return False


def restart(server: RedisServer) -> None:
    server.stop()
    server.start(START_TIMEOUT)


@pytest.mark.timeout(240)
async def test_every_service_is_not_ready_while_redis_loads_and_ready_after(
    tmp_path: Path, loading_redis: RedisServer
) -> None:
    async with run_sandbox() as provider_url:
        env = {
            "RESETGATE_REDIS_URL": loading_redis.url,
            "RESETGATE_TOKEN_KEYS": TEST_TOKEN_KEYS,
            "RESETGATE_PROVIDER_URL": provider_url,
            "RESETGATE_PROVIDER_API_KEY": SANDBOX_API_KEY,
            "RESETGATE_INTERNAL_API_TOKEN": "loading-internal-token-0123456789",
            "RESETGATE_PARTITIONS": "2",
            "RESETGATE_REDIS_TIMEOUT_SECONDS": "1",
        }
        port = loading_redis.port
        async with Processes(tmp_path, env) as processes:
            services = await asyncio.gather(*(processes.start(name) for name in SERVICES))
            # SIGTERM, then load the AOF again. The services are asked while Redis says it
            # loads, from beside the restart, not after it: on a loaded machine the restart's
            # own probe (it waits as long as any start may) returned after the loading ended.
            restarting = asyncio.create_task(asyncio.to_thread(restart, loading_redis))
            seen: dict[str, set[int]] = {name: set() for name in SERVICES}
            timeout = aiohttp.ClientTimeout(total=2)
            async with aiohttp.ClientSession(timeout=timeout) as session:
                while not restarting.done() or await asyncio.to_thread(loading, port):
                    if await asyncio.to_thread(loading, port):
                        for service in services:
                            seen[service.name].add(await readiness(session, service.ops_url))
                    await asyncio.sleep(0.2)
                await restarting
                await asyncio.to_thread(wait_loaded, loading_redis.port, 30)
                for service in services:
                    await service.wait_ready(START_TIMEOUT)
            for service in services:
                assert 503 in seen[service.name], (service.name, seen[service.name])
                assert service.running, service.tail()
                assert "Traceback" not in service.logs(), service.tail()

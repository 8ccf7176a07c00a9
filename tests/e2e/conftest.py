"""The whole stack as real processes: redis-server, the sandbox, admission, sender, poller
and router, each ``python -m services.<name>``; one stack for the e2e package (starting
six processes per test would cost more than the tests). Tests use their own accounts and
put the sandbox's faults back with :func:`baseline`."""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from redis.asyncio import Redis, RedisCluster

from services.ctl.embedded import RedisServer, free_port
from shared.directory import Account, RedisDirectory
from tests.conftest import TEST_TOKEN_KEYS
from tests.support.processes import WAIT_TIMEOUT, Processes
from tests.support.redis_cluster import RedisClusterServers
from tests.support.sandbox import SANDBOX_API_KEY, configure, run_sandbox_process
from tests.support.webhooks import poller_credentials, sandbox_webhooks

INTERNAL_TOKEN = "e2e-internal-token-0123456789"
DELIVERED_DELAY = 1.5
# The sandbox settings every test starts from (faults off).
BASELINE: dict[str, Any] = {
    "delivered_delay_seconds": DELIVERED_DELAY,
    "drop_every": 0,
    "slow_every": 0,
    "duplicate_event_every": 0,
    "out_of_order_every": 0,
    "bounce_domain": "bounce.example",
}


def service_env(redis_url: str, provider_url: str) -> dict[str, str]:
    return {
        "RESETGATE_REDIS_URL": redis_url,
        "RESETGATE_TOKEN_KEYS": TEST_TOKEN_KEYS,
        "RESETGATE_INTERNAL_API_TOKEN": INTERNAL_TOKEN,
        "RESETGATE_PROVIDER_URL": provider_url,
        "RESETGATE_PROVIDER_API_KEY": SANDBOX_API_KEY,
        "RESETGATE_PARTITIONS": "4",
        "RESETGATE_COOLDOWN_SECONDS": "60",
        "RESETGATE_IP_LIMIT_PER_MINUTE": "0",
        "RESETGATE_OBSERVATION_WINDOW_SECONDS": "5",
        "RESETGATE_SHUTDOWN_GRACE_SECONDS": "5",
        "RESETGATE_LOG_LEVEL": "INFO",
    }


SENDER_ENV = {
    "RESETGATE_LEASE_SECONDS": "5",
    "RESETGATE_CONNECT_TIMEOUT_SECONDS": "1",
    "RESETGATE_TOTAL_TIMEOUT_SECONDS": "2",
    "RESETGATE_PROMOTE_INTERVAL_SECONDS": "0.05",
    "RESETGATE_BACKOFF_BASE_SECONDS": "0.05",
    "RESETGATE_BACKOFF_CAP_SECONDS": "0.5",
    "RESETGATE_PROVIDER_MAX_RATE": "500",
    "RESETGATE_CONCURRENCY": "4",
}
POLLER_ENV = {
    "RESETGATE_POLL_INTERVAL_SECONDS": "0.2",
    "RESETGATE_RECONCILE_GRACE_SECONDS": "1",
    "RESETGATE_RECONCILE_INTERVAL_SECONDS": "0.2",
    "RESETGATE_CLOSE_INTERVAL_SECONDS": "0.2",
    "RESETGATE_POLL_MAX_REQUESTS_PER_MINUTE": "6000",
    "RESETGATE_LEASE_SECONDS": "3",
}
ROUTER_ENV = {"RESETGATE_CLAIM_IDLE_SECONDS": "2", "RESETGATE_BLOCK_MS": "100"}


class E2E:
    """Handles on the running stack, and what a test does with it."""

    def __init__(self, processes: Processes, redis: Redis, provider_url: str) -> None:
        self.processes = processes
        self.redis = redis
        self.provider_url = provider_url

    def __getitem__(self, name: str) -> Any:
        return self.processes[name]

    async def account(self, account_id: str, domain: str = "example.com") -> str:
        login = f"login-{account_id}"
        await RedisDirectory(self.redis).add(login, Account(account_id, f"{account_id}@{domain}"))
        return login

    async def internal(self, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        url = self.processes["admission"].url + path
        headers = {"Authorization": f"Bearer {INTERNAL_TOKEN}"}
        async with (
            aiohttp.ClientSession() as session,
            session.request(method, url, headers=headers, **kwargs) as response,
        ):
            return response.status, await response.json()

    async def admit(self, account_id: str, entry_point: str = "agent") -> str:
        status, body = await self.internal(
            "POST",
            "/internal/v1/recovery-operations",
            json={"account_id": account_id, "entry_point": entry_point, "actor": "e2e"},
        )
        assert status in (200, 201), body
        return str(body["operation_id"])

    async def operation(self, operation_id: str) -> dict[str, Any]:
        path = f"/internal/v1/recovery-operations/{operation_id}"
        status, body = await self.internal("GET", path)
        assert status == 200, body
        return dict(body)

    async def until(
        self, operation_id: str, check: Callable[[dict[str, Any]], bool], timeout: float = 60
    ) -> dict[str, Any]:
        async def probe() -> dict[str, Any] | None:
            view = await self.operation(operation_id)
            return view if check(view) else None

        return dict(await poll(probe, timeout))


async def poll(
    probe: Callable[[], Awaitable[Any]], timeout: float = WAIT_TIMEOUT, every: float = 0.05
) -> Any:
    """``probe()`` until it returns something truthy (which is returned)."""
    async with asyncio.timeout(timeout):
        while True:
            if value := await probe():
                return value
            await asyncio.sleep(every)


async def baseline(provider_url: str, **changes: Any) -> None:
    await configure(provider_url, **{**BASELINE, **changes})


# `make test-cluster` (and `make test`) run this package a second time against a 3-master
# Redis Cluster: every service gets RESETGATE_REDIS_CLUSTER=true, the test a cluster client.
CLUSTER = os.environ.get("RESETGATE_TEST_REDIS") == "cluster"


@pytest.fixture(scope="package")
def e2e_redis() -> Iterator[RedisServer | RedisClusterServers]:
    server = RedisClusterServers().start() if CLUSTER else RedisServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="package")
async def e2e(e2e_redis: RedisServer | RedisClusterServers) -> AsyncIterator[E2E]:
    logs = Path(tempfile.mkdtemp(prefix="rg-e2e-"))
    redis: Any = (
        RedisCluster.from_url(e2e_redis.url, decode_responses=True)
        if CLUSTER
        else Redis.from_url(e2e_redis.url, decode_responses=True)
    )
    await redis.ping()
    async with run_sandbox_process(**BASELINE) as provider_url:
        base = service_env(e2e_redis.url, provider_url)
        base["RESETGATE_REDIS_CLUSTER"] = "true" if CLUSTER else "false"
        async with Processes(logs, base) as processes:
            processes.add("admission")
            processes.add("sender", **SENDER_ENV)
            processes.add("poller", **POLLER_ENV)
            processes.add("router", **ROUTER_ENV)
            await asyncio.gather(*(processes.start(n) for n in processes.services))
            yield E2E(processes, redis, provider_url)
    await redis.aclose()


@pytest.fixture
async def live(e2e: E2E) -> AsyncIterator[E2E]:
    """The shared stack with the sandbox's faults off; fails the test if a service died."""
    await baseline(e2e.provider_url)
    yield e2e
    dead = [s.name for s in e2e.processes.services.values() if not s.running]
    for name in dead:  # keep the rest of the package running
        await e2e.processes[name].start()
    assert not dead, f"services died during the test: {dead}"


@asynccontextmanager
async def pushed_events_stack(
    redis_url: str, provider: str, logs: Path, sandbox: dict[str, Any], **env: str
) -> AsyncIterator[E2E]:
    """admission, a sender and a poller as real processes against ``provider``'s sandbox,
    which pushes its signed webhooks to the poller as a deployment is wired. ``sandbox``:
    the sandbox's other settings; ``env``: the services' other variables."""
    port = free_port()
    async with run_sandbox_process(
        mode=provider, **sandbox_webhooks(provider, port), **sandbox
    ) as sandbox_url:
        base = {
            **service_env(redis_url, sandbox_url),
            "RESETGATE_PROVIDER_KIND": provider,
            "RESETGATE_PROVIDER_NAME": provider,
            "RESETGATE_MAILGUN_DOMAIN": "mg.game.example",
            "RESETGATE_OBSERVATION_WINDOW_SECONDS": "600",
            **env,
        }
        async with Processes(logs, base) as processes:
            processes.add("admission")
            processes.add("sender", **SENDER_ENV)
            processes.add(
                "poller",
                **POLLER_ENV,
                RESETGATE_WEBHOOK_PORT=str(port),
                **await poller_credentials(provider, sandbox_url),
            )
            await asyncio.gather(*(processes.start(n) for n in processes.services))
            listening = int(processes["poller"].env["RESETGATE_WEBHOOK_PORT"])
            if listening != port:  # another process took the first port; the poller drew anew
                await configure(sandbox_url, **sandbox_webhooks(provider, listening))
            redis = Redis.from_url(redis_url, decode_responses=True)
            try:
                yield E2E(processes, redis, sandbox_url)
            finally:
                await redis.aclose()

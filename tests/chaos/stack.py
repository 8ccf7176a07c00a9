"""The whole stack as real processes for the chaos and outage tests.

redis-server (AOF), the sandbox provider (``python -m services.sandbox``), admission, two
senders, a poller and a router, each ``python -m services.<name>`` with its log in
``log_dir``. Timeouts are short so that a killed process's leases run out in seconds, and
the poller asks about an ambiguous attempt only after a slow provider has surely answered
(grace 4 s > the sandbox's 2.5 s slow responses > the sender's 2 s timeout).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from redis.asyncio import Redis

from shared import keys
from shared.redis import create_client
from shared.settings import CommonSettings
from tests.chaos.crashable_redis import Crash, CrashableRedis
from tests.conftest import TEST_TOKEN_KEYS
from tests.support.processes import START_TIMEOUT, Processes, ServiceProcess
from tests.support.sandbox import SANDBOX_API_KEY, run_sandbox_process

INTERNAL_TOKEN = "chaos-internal-token-0123456789"
PARTITIONS = 8
SERVICES = ("admission", "sender-1", "sender-2", "poller", "router")

SENDER_ENV = {
    "RESETGATE_LEASE_SECONDS": "5",
    "RESETGATE_CONNECT_TIMEOUT_SECONDS": "1",
    "RESETGATE_TOTAL_TIMEOUT_SECONDS": "2",
    "RESETGATE_PROMOTE_INTERVAL_SECONDS": "0.1",
    "RESETGATE_BACKOFF_BASE_SECONDS": "0.1",
    "RESETGATE_BACKOFF_CAP_SECONDS": "1",
    "RESETGATE_PROVIDER_MAX_RATE": "2000",
    "RESETGATE_PROVIDER_BURST": "100",
    "RESETGATE_CONCURRENCY": "16",
}
POLLER_ENV = {
    "RESETGATE_POLL_INTERVAL_SECONDS": "0.5",
    "RESETGATE_RECONCILE_GRACE_SECONDS": "4",
    "RESETGATE_RECONCILE_INTERVAL_SECONDS": "0.5",
    "RESETGATE_CLOSE_INTERVAL_SECONDS": "1",
    "RESETGATE_POLL_MAX_REQUESTS_PER_MINUTE": "60000",
    "RESETGATE_POLL_BURST": "200",
    "RESETGATE_LEASE_SECONDS": "3",
    "RESETGATE_ORPHAN_HOLD_SECONDS": "30",
}
ROUTER_ENV = {"RESETGATE_CLAIM_IDLE_SECONDS": "2", "RESETGATE_BLOCK_MS": "200"}
# What the sandbox injects while chaos runs: 5xx, accepted-then-dropped connections, and
# responses slower than the sender's timeout (each of the last two leaves an ambiguous
# attempt the poller must reconcile without a second email).
FAULTS: dict[str, Any] = {
    "error_probability": 0.03,
    "drop_probability": 0.01,
    "slow_probability": 0.01,
    "slow_seconds": 2.5,
}
NO_FAULTS: dict[str, Any] = {
    "error_probability": 0.0,
    "drop_probability": 0.0,
    "slow_probability": 0.0,
}


# CHAOS_PROVIDER=postmark (or sendgrid, mailgun) runs the chaos against the sandbox speaking
# that provider's API instead of the http contract.
PROVIDER_KIND = os.environ.get("CHAOS_PROVIDER", "http")


def service_env(redis_url: str, provider_url: str, log_level: str) -> dict[str, str]:
    return {
        "RESETGATE_PROVIDER_KIND": PROVIDER_KIND,
        "RESETGATE_MAILGUN_DOMAIN": "chaos.mailgun.test",
        "RESETGATE_REDIS_URL": redis_url,
        "RESETGATE_TOKEN_KEYS": TEST_TOKEN_KEYS,
        "RESETGATE_INTERNAL_API_TOKEN": INTERNAL_TOKEN,
        "RESETGATE_PROVIDER_URL": provider_url,
        "RESETGATE_PROVIDER_API_KEY": SANDBOX_API_KEY,
        "RESETGATE_PARTITIONS": str(PARTITIONS),
        # Longer than any run: a second admission for an account must converge, never create.
        "RESETGATE_COOLDOWN_SECONDS": "3600",
        "RESETGATE_IP_LIMIT_PER_MINUTE": "0",
        "RESETGATE_OBSERVATION_WINDOW_SECONDS": "10",
        "RESETGATE_SHUTDOWN_GRACE_SECONDS": "5",
        "RESETGATE_REDIS_TIMEOUT_SECONDS": "3",
        "RESETGATE_LOG_LEVEL": log_level,
    }


def account_id(index: int) -> str:
    return f"chaos-{index}"


def login(index: int) -> str:
    return f"chaos-login-{index}"


async def seed_directory(redis: Redis, count: int) -> None:
    """``count`` accounts (and their logins) in the Redis directory."""
    for start in range(0, count, 2000):
        async with redis.pipeline(transaction=False) as pipe:
            for i in range(start, min(count, start + 2000)):
                pipe.hset(
                    keys.directory_account(account_id(i)),
                    mapping={"email": f"c{i}@example.com", "locale": "en"},
                )
                pipe.set(keys.directory_login(login(i)), account_id(i))
            await pipe.execute()


@dataclass
class Stack:
    redis_server: CrashableRedis
    redis: Redis
    provider_url: str
    processes: Processes
    log_dir: Path

    def __getitem__(self, name: str) -> ServiceProcess:
        return self.processes[name]

    @property
    def admission_url(self) -> str:
        return self.processes["admission"].url

    async def seed_directory(self, count: int) -> None:
        await seed_directory(self.redis, count)

    async def ready(self, name: str) -> bool:
        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session,
                session.get(self.processes[name].ops_url + "/readyz") as response,
            ):
                return response.status == 200
        except (aiohttp.ClientError, TimeoutError):
            return False


def _add_services(processes: Processes, log_dir: Path, env: dict[str, dict[str, str]]) -> None:
    base = processes.base_env
    processes.add("admission", **env.get("admission", {}))
    for name in ("sender-1", "sender-2"):  # consumer names default to host-pid: new per start
        sender = {**base, **SENDER_ENV, **env.get("sender", {})}
        processes.services[name] = ServiceProcess(name, sender, log_dir, module="services.sender")
    processes.add("poller", **{**POLLER_ENV, **env.get("poller", {})})
    processes.add("router", **{**ROUTER_ENV, **env.get("router", {})})


@asynccontextmanager
async def running_stack(
    log_dir: Path,
    *,
    appendfsync: str = "everysec",
    crash: Crash = Crash.PROCESS,
    accounts: int = 0,
    seed: int = 0,
    log_level: str = "INFO",
    faults: bool = True,
    sandbox: dict[str, Any] | None = None,
    env: dict[str, dict[str, str]] | None = None,
) -> AsyncIterator[Stack]:
    """Redis, the sandbox and the five services, all ready; everything stopped on exit.

    ``sandbox``: settings for the sandbox on top of the defaults; ``env``: extra variables
    per service kind ("admission", "sender", "poller", "router").
    """
    server = CrashableRedis(appendfsync, crash)
    await server.start_async()
    async with AsyncExitStack() as exit_stack:
        exit_stack.push_async_callback(server.stop_async)
        # The services' own client: reconnects (with backoff) after the Redis crash.
        redis = create_client(CommonSettings(redis_url=server.url, redis_timeout_seconds=10))
        assert isinstance(redis, Redis)
        exit_stack.push_async_callback(redis.aclose)
        provider = {
            "seed": seed,
            "log_level": "WARNING",
            "delivered_delay_seconds": 1.0,
            "mode": PROVIDER_KIND,
            **(FAULTS if faults else {}),
            **(sandbox or {}),
        }
        provider_url = await exit_stack.enter_async_context(run_sandbox_process(**provider))
        processes = await exit_stack.enter_async_context(
            Processes(log_dir, service_env(server.url, provider_url, log_level))
        )
        stack = Stack(server, redis, provider_url, processes, log_dir)
        await stack.seed_directory(accounts)
        _add_services(processes, log_dir, env or {})
        await asyncio.gather(*(s.start(START_TIMEOUT) for s in processes.services.values()))
        yield stack

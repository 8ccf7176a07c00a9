"""Helpers: the admission app over real TCP (aiohttp's TestServer) or as a child process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
from aiohttp.test_utils import TestClient, TestServer

from services.admission.app import create_app
from services.admission.settings import AdmissionSettings
from services.ctl.embedded import free_port
from shared.directory import Account, Directory, RedisDirectory
from shared.fastredis import fast_client
from shared.redis import RedisClient, create_client, ping
from tests.conftest import TEST_TOKEN_KEYS
from tests.support.processes import START_TIMEOUT

INTERNAL_TOKEN = "internal-test-token-0123456789"
BEARER = {"Authorization": f"Bearer {INTERNAL_TOKEN}"}
JSON = {"Content-Type": "application/json"}
ROOT = Path(__file__).resolve().parents[2]

ALICE = ("alice@example.com", Account("acct-alice", "alice.mail@example.com", "en"))
BOB = ("bob_the_player", Account("acct-bob", "bob.mail@example.org", "de"))


def admission_settings(redis_url: str, **overrides: Any) -> AdmissionSettings:
    values: dict[str, Any] = {
        "redis_url": redis_url,
        "token_keys": TEST_TOKEN_KEYS,
        "internal_api_token": INTERNAL_TOKEN,
        "partitions": 4,
        "cooldown_seconds": 60,
        "ip_limit_per_minute": 0,
    }
    values.update(overrides)
    return AdmissionSettings(**values)


async def seed_directory(client: RedisClient, *accounts: tuple[str, Account]) -> None:
    directory = RedisDirectory(client)
    for login, account in accounts or (ALICE, BOB):
        await directory.add(login, account)


@asynccontextmanager
async def serving(
    settings: AdmissionSettings,
    client: RedisClient | None = None,
    directory: Directory | None = None,
    archive: asyncpg.Pool | None = None,
) -> AsyncIterator[TestClient[Any, Any]]:
    """The app over real TCP; by default on the client the service itself would build."""
    own = client is None
    store = create_client(settings) if client is None else client
    await ping(store)  # as shared.redis.connect does: a Cluster client learns its slots first
    pipelined: RedisClient = fast_client(store, settings.fast_redis)  # what __main__ hands the app
    app = create_app(settings, pipelined, directory or RedisDirectory(pipelined), archive)
    try:
        async with TestClient(TestServer(app, host="127.0.0.1")) as http:
            yield http
    finally:
        if pipelined is not store:
            await pipelined.aclose()
        if own:
            await store.aclose()


async def public(http: TestClient[Any, Any], login: str, **headers: str) -> aiohttp.ClientResponse:
    return await http.post("/v1/password-resets", json={"login": login}, headers=headers)


async def internal_admit(
    http: TestClient[Any, Any], account_id: str, entry_point: str = "agent", actor: str = "ann"
) -> aiohttp.ClientResponse:
    body = {"account_id": account_id, "entry_point": entry_point, "actor": actor}
    return await http.post("/internal/v1/recovery-operations", json=body, headers=BEARER)


async def consume(
    http: TestClient[Any, Any], operation_id: str, token: str
) -> aiohttp.ClientResponse:
    body = {"operation_id": operation_id, "token": token}
    return await http.post("/internal/v1/reset-tokens/consume", json=body, headers=BEARER)


def service_env(redis_url: str, port: int, ops_port: int, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESETGATE_")}
    env.update(
        RESETGATE_REDIS_URL=redis_url,
        RESETGATE_TOKEN_KEYS=TEST_TOKEN_KEYS,
        RESETGATE_INTERNAL_API_TOKEN=INTERNAL_TOKEN,
        RESETGATE_HTTP_HOST="127.0.0.1",
        RESETGATE_HTTP_PORT=str(port),
        RESETGATE_METRICS_PORT=str(ops_port),
        RESETGATE_PARTITIONS="4",
        RESETGATE_SHUTDOWN_GRACE_SECONDS="2",
    )
    env.update(extra)
    return env


@contextmanager
def admission_process(
    redis_url: str, log_path: Path, **extra: str
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``python -m services.admission`` as a child process; yields (base URL, process)."""
    port, ops_port = free_port(), free_port()
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "services.admission"],
            cwd=ROOT,
            env=service_env(redis_url, port, ops_port, **extra),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(f"http://127.0.0.1:{ops_port}", process)
        yield base, process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_ready(
    base: str, process: subprocess.Popen[bytes], timeout: float = START_TIMEOUT
) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"admission exited with {process.returncode}")
        try:
            with urllib.request.urlopen(base + "/readyz", timeout=0.5) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("admission did not become ready")

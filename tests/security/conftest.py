"""Hostile input and security checks against real service processes (tests/support/processes).

Every test here talks to ``python -m services.<name>`` over loopback, on the session's
redis-server (flushed per test by the ``redis`` fixture), with its own environment.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from services.ctl.embedded import RedisServer
from shared.directory import Account, RedisDirectory
from tests.conftest import TEST_TOKEN_KEYS
from tests.support.processes import Processes, ServiceProcess

INTERNAL_TOKEN = "security-internal-token-0123456789"
BEARER = {"Authorization": f"Bearer {INTERNAL_TOKEN}"}


def base_env(redis_url: str, **extra: str) -> dict[str, str]:
    return {
        "RESETGATE_REDIS_URL": redis_url,
        "RESETGATE_TOKEN_KEYS": TEST_TOKEN_KEYS,
        "RESETGATE_INTERNAL_API_TOKEN": INTERNAL_TOKEN,
        "RESETGATE_PARTITIONS": "4",
        "RESETGATE_COOLDOWN_SECONDS": "600",
        "RESETGATE_IP_LIMIT_PER_MINUTE": "0",
        "RESETGATE_SHUTDOWN_GRACE_SECONDS": "3",
        "RESETGATE_LOG_LEVEL": "DEBUG",  # debug lines must be clean too
        **extra,
    }


@pytest.fixture
async def stack(
    redis: Redis, redis_server: RedisServer, tmp_path: Path
) -> AsyncIterator[Processes]:
    """An empty set of processes on the (flushed) session Redis; each test starts its own."""
    async with Processes(tmp_path / "logs", base_env(redis_server.url)) as processes:
        yield processes


async def add_accounts(redis: Redis, count: int, prefix: str = "sec") -> list[tuple[str, str]]:
    """``count`` directory entries; returns (login, account_id); logins are addresses."""
    directory = RedisDirectory(redis)
    made = []
    for i in range(count):
        login, account_id = f"{prefix}.player{i}@example.com", f"acct-{prefix}-{i}"
        await directory.add(login, Account(account_id, f"{prefix}.mail{i}@example.org"))
        made.append((login, account_id))
    return made


def rss_kib(service: ServiceProcess) -> int:
    """The service's resident set (from /proc), in KiB."""
    assert service.process is not None
    status = Path(f"/proc/{service.process.pid}/status").read_text()
    line = next(row for row in status.splitlines() if row.startswith("VmRSS:"))
    return int(line.split()[1])


# Bounds small enough to observe in a test: a connection without a complete request is closed
# after 2 s, a body must arrive within 1 s.
TIGHT = {"RESETGATE_HTTP_KEEPALIVE_SECONDS": "2", "RESETGATE_BODY_TIMEOUT_SECONDS": "1"}


@pytest.fixture(scope="module")
async def admission(
    redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ServiceProcess]:
    """One admission process for a module (tight connection bounds, no IP limit)."""
    logs = tmp_path_factory.mktemp("admission-logs")
    async with Processes(logs, base_env(redis_server.url, **TIGHT)) as processes:
        yield await processes.start("admission")


class Exchange:
    """One request written as raw bytes over asyncio streams, and what came back."""

    def __init__(self, port: int) -> None:
        self.port = port

    async def send(self, data: bytes, timeout: float = 10.0) -> bytes:
        """Write ``data``, read until the server closes (or ``timeout``)."""
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        try:
            writer.write(data)
            await writer.drain()
            return await _read_until_closed(reader, timeout)
        except ConnectionResetError:
            return b""
        finally:
            writer.close()


async def _read_until_closed(reader: asyncio.StreamReader, timeout: float) -> bytes:
    chunks = []
    try:
        async with asyncio.timeout(timeout):
            while chunk := await reader.read(65536):
                chunks.append(chunk)
    except (TimeoutError, ConnectionResetError):
        pass
    return b"".join(chunks)

"""Hostile input and security checks against real service processes (tests/support/processes).

Every test here talks to ``python -m services.<name>`` over loopback, on the session's
redis-server (flushed per test by the ``redis`` fixture), with its own environment.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

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


class RawConnection:
    """A plain TCP socket to a service: for what an HTTP client library would refuse to send."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)

    def send(self, data: bytes) -> bool:
        """False once the server has closed (or reset) the connection."""
        try:
            self.sock.sendall(data)
            return True
        except OSError:
            return False

    def read_all(self, timeout: float = 5.0) -> bytes:
        """Everything until the server closes, or what arrived within ``timeout``."""
        self.sock.settimeout(timeout)
        chunks = []
        try:
            while chunk := self.sock.recv(65536):
                chunks.append(chunk)
        except (TimeoutError, ConnectionResetError):
            pass
        return b"".join(chunks)

    def closed_by_peer(self, wait: float) -> bool:
        """True if the server closed within ``wait`` s (reads and drops whatever it answered)."""
        deadline = time.monotonic() + wait
        while (left := deadline - time.monotonic()) > 0:
            self.sock.settimeout(left)
            try:
                if not self.sock.recv(65536):
                    return True
            except TimeoutError:
                return False
            except ConnectionResetError:
                return True
        return False

    def close(self) -> None:
        self.sock.close()


def status_of(response: bytes) -> int:
    """The status code of a raw HTTP response (0 if there is none)."""
    head = response.split(b"\r\n", 1)[0].split()
    return int(head[1]) if len(head) >= 2 and head[1].isdigit() else 0


async def in_thread(function: Any, *args: Any) -> Any:
    """Blocking socket work off the event loop (the loop may be serving something)."""
    return await asyncio.to_thread(function, *args)


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

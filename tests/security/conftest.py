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

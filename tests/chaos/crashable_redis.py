"""A redis-server with AOF that a test can crash like a process or like a host.

``Crash.PROCESS``: SIGKILL. Whatever Redis had ``write()``-n to its AOF is in the kernel's
page cache and survives, so even ``appendfsync everysec`` loses (almost) nothing.
``Crash.HOST``: SIGKILL with ``volatile_cache.so`` preloaded, which holds every AOF write in
the process until Redis fsyncs it, so the kill also loses the unsynced tail: what a power
cut or a kernel panic does to ``everysec`` (up to about a second of acknowledged writes),
and what ``appendfsync always`` (fsync before the reply) is for.

The library is compiled with the machine's C compiler once per session; without one,
:func:`volatile_cache` returns None and host crashes cannot be emulated.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
import time
from enum import StrEnum
from functools import cache
from pathlib import Path

import redis

from services.ctl.embedded import RedisServer

SOURCE = Path(__file__).with_name("volatile_cache.c")


class Crash(StrEnum):
    PROCESS = "process"
    HOST = "host"


@cache
def volatile_cache() -> Path | None:
    """Build volatile_cache.so (once); None when there is no C compiler."""
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        return None
    target = Path(tempfile.mkdtemp(prefix="rg-volatile-")) / "volatile_cache.so"
    try:
        subprocess.run(
            [
                compiler,
                "-shared",
                "-fPIC",
                "-O2",
                "-o",
                str(target),
                str(SOURCE),
                "-ldl",
                "-lpthread",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError):
        return None
    return target


def wait_loaded(port: int, timeout: float) -> None:
    """Until the redis-server on ``port`` has loaded its dataset (INFO persistence loading:0)."""
    deadline = time.monotonic() + timeout
    with redis.Redis(port=port, socket_timeout=2) as client:
        while time.monotonic() < deadline:
            if not int(client.info("persistence")["loading"]):
                return
            time.sleep(0.05)
    raise RuntimeError(f"redis on {port} still loading after {timeout}s")


class CrashableRedis(RedisServer):
    """AOF on; ``crash()`` SIGKILLs it, as a process or (with the library) as a host."""

    def __init__(self, appendfsync: str, crash: Crash) -> None:
        super().__init__(appendonly=True, appendfsync=appendfsync)
        self.crash_kind = crash
        self.library = volatile_cache() if crash is Crash.HOST else None
        if crash is Crash.HOST and self.library is None:
            raise RuntimeError("no C compiler: a host crash cannot be emulated")

    def args(self) -> list[str]:
        args = super().args()
        if self.library is None:
            return args
        # env(1) execs redis-server in place: same pid, so stop(kill=True) kills Redis itself.
        return ["env", f"LD_PRELOAD={self.library}", *args]

    def crash(self) -> None:
        self.stop(kill=True)

    async def start_async(self, timeout: float = 60.0) -> None:
        """Start and wait until the AOF is loaded, without blocking the event loop. Redis
        answers INFO (what ``start`` waits for) while it loads, and every data command
        with BusyLoadingError until it is done."""
        await asyncio.to_thread(self.start, timeout)
        await asyncio.to_thread(wait_loaded, self.port, timeout)

    async def stop_async(self) -> None:
        await asyncio.to_thread(self.stop)

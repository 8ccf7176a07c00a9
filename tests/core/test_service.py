"""The wiring every service shares (shared/service.py)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket

from aiohttp import web

from services.ctl.embedded import free_port
from shared.service import serve
from shared.settings import CommonSettings


async def test_readiness_comes_only_once_the_public_port_accepts() -> None:
    """Admission said ready before its public listener was bound: a caller (or Kubernetes'
    endpoints) that trusted /readyz at once had its first request refused."""
    port = free_port()
    accepted: list[bool] = []

    def listening() -> None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            accepted.append(True)
        except OSError:
            accepted.append(False)

    async def stop_soon(stop: asyncio.Event) -> None:
        os.kill(os.getpid(), signal.SIGTERM)  # serve's own handler turns this into `stop`
        await stop.wait()

    settings = CommonSettings(http_host="127.0.0.1", shutdown_grace_seconds=1)
    public = (web.Application(), port)
    await serve("test", settings, [stop_soon], public=public, listening=listening)
    assert accepted == [True]

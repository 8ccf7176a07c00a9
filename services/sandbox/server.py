"""Running the sandbox: ``main()`` for ``python -m services.sandbox``, ``start()`` for tests.

The sandbox stands in for the email provider and is not wired like resetgate's services
(``shared.service.main``): it has no Redis and no operational listener (``/healthz`` and
``/readyz`` are on its one port), and its settings are ``RESETGATE_SANDBOX_*``. It shares
the event loop runner.
"""

from __future__ import annotations

import asyncio
import signal

from aiohttp import web

from services.sandbox.app import create_app
from services.sandbox.logs import configure_logging, log
from services.sandbox.settings import SandboxSettings
from shared.service import run
from shared.settings import load

# Short: in-flight sends are test traffic, and Kubernetes/CI should not wait long.
SHUTDOWN_GRACE_SECONDS = 5.0


async def start(settings: SandboxSettings) -> tuple[web.AppRunner, int]:
    """Start listening; returns the runner (call ``cleanup()``) and the bound port."""
    runner = web.AppRunner(
        create_app(settings),
        access_log=None,
        shutdown_timeout=SHUTDOWN_GRACE_SECONDS,
        # An unread body (a 413) is not drained: drop the connection at once. Draining it
        # could also hold shutdown for the whole grace period.
        lingering_time=0,
    )
    await runner.setup()
    site = web.TCPSite(runner, settings.host, settings.port, backlog=1024)
    await site.start()
    port = int(runner.addresses[0][1])
    return runner, port


async def serve(settings: SandboxSettings, stop: asyncio.Event) -> None:
    """Serve until ``stop`` is set, then close connections within the grace period."""
    runner, port = await start(settings)
    log("sandbox.listening", host=settings.host, port=port)
    try:
        await stop.wait()
    finally:
        log("sandbox.stopping")
        await runner.cleanup()
        log("sandbox.stopped")


async def _run(settings: SandboxSettings) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await serve(settings, stop)


def main() -> None:
    settings = load(SandboxSettings)  # a bad setting: one line naming it, exit 2
    configure_logging(settings.log_level)
    run(lambda: _run(settings))

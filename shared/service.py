"""The lifecycle every service shares: HTTP endpoints, background loops, graceful shutdown.

Two listeners: the public one (admission's API only) and the operational one on
``RESETGATE_METRICS_PORT`` (``/healthz``, ``/readyz``, ``/metrics``) in every service. What the
operational routes tell (admission counts by result, for one) would enumerate accounts if a
game client could read it, so they are never on the public listener. The operational
listener starts with the process, before Redis answers: liveness is true from the start and
readiness says "not yet" until the service has its store.

A worker is ``async def loop(stop: asyncio.Event) -> None`` that returns soon after ``stop``
is set. SIGTERM sets it; loops get ``shutdown_grace_seconds`` (shorter than the pod's
terminationGracePeriodSeconds) to finish what is in flight, then are cancelled.

Every service is wired the same way: ``services/<name>/app.py`` has ``main()``, which calls
:func:`main` here with its settings class and its ``wire``: an async context manager that
takes the settings and the connected Redis client, opens what else the service needs (a
provider session, the directory), and yields a :class:`Wiring` (its workers, its readiness
check and, for admission, its public app). Loading settings, logging, the operational
listener, connecting to Redis, serving and closing are done here, once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, TypeVar

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from shared import codec, metrics, tracing
from shared import logging as jsonlog
from shared.logging import event
from shared.redis import RedisClient, connect, ping
from shared.settings import CommonSettings, ListenerSettings, load

log = logging.getLogger(__name__)

Worker = Callable[[asyncio.Event], Coroutine[Any, Any, None]]
ReadinessCheck = Callable[[], Awaitable[dict[str, bool]]]

READINESS: web.AppKey[ReadinessCheck] = web.AppKey("readiness", ReadinessCheck)  # type: ignore[arg-type]


def redis_readiness(service: str, client: RedisClient) -> ReadinessCheck:
    """Ready while Redis answers (and ``resetgate_redis_up`` says so): the check of a
    service whose only dependency is Redis."""

    async def check() -> dict[str, bool]:
        up = await ping(client)
        metrics.redis_up.labels(service).set(int(up))
        return {"redis": up}

    return check


async def sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    """Sleep up to ``seconds``, returning early once shutdown begins."""
    if stop.is_set():
        return
    # A deadline on this task, not wait_for: on Python 3.11 wait_for wraps the wait in a
    # task of its own and, at the timeout, cancels it and waits for it, three more turns of
    # the event loop per sleep (the pacer sleeps once per email).
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(max(seconds, 0.001)):
            await stop.wait()


def json_response(body: Any, status: int = 200, **headers: str) -> web.Response:
    return web.Response(
        body=codec.dumps(body), status=status, content_type="application/json", headers=headers
    )


def json_error(status: int, error: str, message: str, **headers: str) -> web.Response:
    return json_response({"error": error, "message": message}, status, **headers)


async def healthz(_: web.Request) -> web.Response:
    return json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    checks = await request.app[READINESS]()
    ready = all(checks.values())
    return json_response({"ready": ready, "checks": checks}, 200 if ready else 503)


class Readiness:
    """The service's readiness check, "not started" until the service hands it one."""

    def __init__(self) -> None:
        self.check: ReadinessCheck | None = None

    async def __call__(self) -> dict[str, bool]:
        if self.check is None:
            return {"started": False}
        return await self.check()


async def metrics_view(_: web.Request) -> web.Response:
    response = web.Response(body=generate_latest())
    response.headers["Content-Type"] = CONTENT_TYPE_LATEST
    return response


def operational_app(name: str, readiness: ReadinessCheck) -> web.Application:
    """``/healthz``, ``/readyz`` and ``/metrics``: for the operational listener only."""
    app = web.Application(middlewares=[instrument(name)])
    app[READINESS] = readiness
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_view)
    return app


class Operational:
    """The operational listener: started before anything waits for Redis."""

    def __init__(self, name: str, settings: ListenerSettings) -> None:
        self.name = name
        self.settings = settings
        self.readiness = Readiness()
        self.runner = web.AppRunner(
            operational_app(name, self.readiness),
            access_log=None,
            shutdown_timeout=1.0,
            **http_limits(settings),
        )

    def ready_when(self, check: ReadinessCheck) -> None:
        """From now on ``/readyz`` answers what ``check`` says."""
        self.readiness.check = check

    async def start(self) -> None:
        await self.runner.setup()
        port = self.settings.metrics_port
        await web.TCPSite(self.runner, self.settings.http_host, port).start()
        event(log, logging.INFO, "operational listener started", service=self.name, port=port)

    async def close(self) -> None:
        await self.runner.cleanup()


@contextlib.asynccontextmanager
async def operational(name: str, settings: ListenerSettings) -> AsyncIterator[Operational]:
    """The operational listener for the whole life of the process. SIGTERM before the service
    is serving (still waiting for Redis, say) ends the start cleanly; :func:`serve` installs
    its own handlers for the graceful shutdown."""
    metrics.export_only(name)
    listener = Operational(name, settings)
    await listener.start()
    starting = asyncio.current_task()
    stopped: list[int] = []

    def stop_starting(sig: int) -> None:
        stopped.append(sig)
        if starting is not None:
            starting.cancel()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop_starting, sig)
    try:
        yield listener
    except asyncio.CancelledError:
        if not stopped:
            raise
        event(log, logging.INFO, "service stopped while starting", service=name)
    finally:
        await listener.close()


def instrument(service: str) -> Any:
    """Middleware: latency by route template (never the raw path, which may carry ids)."""

    # One labelled child per (route, method, status), looked up once: labels() costs more
    # than the observation on a hot endpoint.
    children: dict[tuple[str, str, int], Any] = {}

    @web.middleware
    async def middleware(request: web.Request, handler: Any) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        started = loop.time()
        status = 500
        try:
            response: web.StreamResponse = await handler(request)
            status = response.status
            return response
        except web.HTTPException as error:
            status = error.status
            raise
        finally:
            info = request.match_info.route.resource
            route = info.canonical if info is not None else "unmatched"
            key = (route, request.method, status)
            child = children.get(key)
            if child is None:
                child = metrics.http_request_duration.labels(service, route, key[1], str(status))
                children[key] = child
            child.observe(loop.time() - started)

    return middleware


# Request-head bounds, stated here rather than left to aiohttp's defaults: a line or one
# header over 8 KiB, or more than 64 headers, is a 400 and a closed connection, so a header
# flood costs at most ~0.5 MiB per connection for at most http_keepalive_seconds.
MAX_LINE_BYTES = 8190
MAX_HEADERS = 64
# A client still sending after its answer (413, 408) gets this long to finish before the
# connection is closed; aiohttp's 10 s would stretch every slow-body bound by that much.
LINGER_SECONDS = 2.0


def http_limits(settings: ListenerSettings) -> dict[str, Any]:
    """The aiohttp server keywords that bound what one connection can cost."""
    return {
        "keepalive_timeout": settings.http_keepalive_seconds,
        "max_line_size": MAX_LINE_BYTES,
        "max_field_size": MAX_LINE_BYTES,
        "max_headers": MAX_HEADERS,
        "lingering_time": LINGER_SECONDS,
    }


async def serve(
    name: str,
    settings: ListenerSettings,
    workers: list[Worker],
    public: tuple[web.Application, int] | None = None,
    listening: Callable[[], None] | None = None,
) -> None:
    """Run every worker (and ``public``, an app and its port) until SIGTERM, then shut down.
    ``listening`` runs once the public port accepts connections: readiness must not say yes
    before it does, or the first requests routed to the pod are refused."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    runner = await _start_public(name, settings, public)
    if listening is not None:
        listening()
    tasks = [asyncio.create_task(worker(stop), name=worker.__name__) for worker in workers]
    stopper = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait([stopper, *tasks], return_when=asyncio.FIRST_COMPLETED)
    # A worker that returned after shutdown began (one that only waits for ``stop``, like a
    # listener) has done what it should; only one that ended first, or raised, has failed.
    failed = [
        task
        for task in done
        if task is not stopper and (task.exception() is not None or not stop.is_set())
    ]
    for task in failed:
        event(
            log,
            logging.ERROR,
            "worker ended before shutdown; stopping the service",
            worker=task.get_name(),
            error=repr(task.exception()),
        )
    stop.set()
    await _drain(tasks, settings.shutdown_grace_seconds)
    if runner is not None:
        await runner.cleanup()
    stopper.cancel()
    event(log, logging.INFO, "service stopped", service=name)
    if failed:
        # Non-zero, so whatever restarts the service (Kubernetes, systemd) sees a failure.
        raise SystemExit(1)


async def _start_public(
    name: str, settings: ListenerSettings, public: tuple[web.Application, int] | None
) -> web.AppRunner | None:
    if public is None:
        event(log, logging.INFO, "service started", service=name)
        return None
    app, port = public
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=5.0, **http_limits(settings))
    await runner.setup()
    await web.TCPSite(runner, settings.http_host, port).start()
    event(log, logging.INFO, "service started", service=name, port=port)
    return runner


async def _drain(tasks: list[asyncio.Task[None]], grace: float) -> None:
    if not tasks:
        return
    _, pending = await asyncio.wait(tasks, timeout=grace)
    for task in pending:
        task.cancel()
    if pending:
        event(log, logging.WARNING, "grace period over; cancelled workers", count=len(pending))
        await asyncio.gather(*pending, return_exceptions=True)


@dataclass(frozen=True, slots=True)
class Wiring:
    """What a service's ``wire`` hands to the shared lifecycle."""

    workers: list[Worker]
    readiness: ReadinessCheck
    public: tuple[web.Application, int] | None = None  # admission's API and its port


S = TypeVar("S", bound=CommonSettings)
Wire = Callable[[S, RedisClient], AbstractAsyncContextManager[Wiring]]


def main(
    name: str, settings_class: type[S], wire: Wire[S], check: Callable[[S], object] | None = None
) -> None:
    """A service's process: settings (or one line naming the bad variable, then exit 2),
    ``check`` (settings the class cannot validate alone), JSON logs, traces when the
    ``OTEL_*`` settings ask for them (flushed at exit), then :func:`start`."""
    settings = load(settings_class)
    if check is not None:
        check(settings)
    jsonlog.setup(name, settings.log_level)
    stop_tracing = tracing.setup(name)
    try:
        run(lambda: start(name, settings, wire))
    finally:
        # Spans still in the exporter's batch leave before the process does.
        stop_tracing()


async def start(name: str, settings: S, wire: Wire[S]) -> None:
    """The operational listener first, then Redis, then the service ``wire`` builds, served
    until SIGTERM; what ``wire`` opened is closed before the Redis client."""
    async with operational(name, settings) as ops:
        client = await connect(settings)
        try:
            async with wire(settings, client) as wiring:
                ready = wiring.readiness
                await serve(
                    name,
                    settings,
                    wiring.workers,
                    wiring.public,
                    listening=lambda: ops.ready_when(ready),
                )
        finally:
            await client.aclose()


def run(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run a service's async main on uvloop when available."""
    try:
        import uvloop

        uvloop.run(main())
    except ImportError:  # pragma: no cover - uvloop is a runtime dependency on Linux
        asyncio.run(main())

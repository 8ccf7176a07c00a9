"""The console as its own aiohttp application on its own listener.

It is never mounted on the public app: ``/console/`` does not exist on the public port.
Admission starts it (``serve_console``) only when ``RESETGATE_CONSOLE_PORT`` is set, bound
to ``RESETGATE_CONSOLE_HOST`` (loopback unless configured), for an auth-proxy sidecar or an
internal-only Service to reach.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

import asyncpg
from aiohttp import web
from aiohttp.typedefs import Handler
from redis.exceptions import RedisError

from services.admission.console import (
    charts,
    find,
    forms,
    oncall,
    overview,
    provider_forms,
    trail,
    views,
)
from services.admission.console.auth import check_csrf, csrf_key, identify
from services.admission.console.context import (
    CSRF_KEY,
    DIRECTORY,
    EVIDENCE,
    PRINCIPAL,
    REDIS,
    SETTINGS,
    SIGN_IN_LIMITER,
)
from services.admission.console.pages import html_errors, message, security_headers
from services.admission.ratelimit import IpLimiter
from services.admission.settings import AdmissionSettings
from shared import actions, keys
from shared.archive import Evidence
from shared.directory import Directory, RedisDirectory
from shared.logging import event
from shared.redis import TRANSIENT_ERRORS, RedisClient
from shared.service import Worker, http_limits

log = logging.getLogger("services.admission.console")

PREFIX = "/console/"
STATIC = Path(__file__).parent / "static"
# Reachable without signing in: the sign-in page and the two files it loads. Nothing else.
OPEN_PATHS = frozenset(
    {"/console/sign-in", "/console/static/console.css", "/console/static/console.js"}
)
MAX_FORM_BYTES = 16384


async def _refuse(request: web.Request) -> web.StreamResponse:
    if request.method in ("GET", "HEAD"):
        raise web.HTTPSeeOther("/console/sign-in")
    return message(request, 401, "Sign in", "Sign in first.", "/console/sign-in")


@web.middleware
async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
    """No principal: only the sign-in page; no read role: nothing; a POST: a valid CSRF
    token from one of our own pages."""
    principal = await identify(request)
    if principal is None:
        return await handler(request) if request.path in OPEN_PATHS else await _refuse(request)
    if not principal.can_read:
        why = principal.refusal or "Your account has no console role."
        return message(request, 403, "Not allowed", why)
    request[PRINCIPAL] = principal
    # Signing in again (a new name, an expired tab) checks its own origin, not a form token.
    if request.method == "POST" and request.path not in OPEN_PATHS:
        form = await request.post()
        if not check_csrf(request, principal, str(form.get("csrf", ""))):
            return message(request, 403, "Form expired", "Reload the page and try again.")
    return await handler(request)


async def _root(_: web.Request) -> web.StreamResponse:
    raise web.HTTPSeeOther(PREFIX)


async def _static(request: web.Request) -> web.StreamResponse:
    name = request.match_info["name"]
    kinds = {"console.css": "text/css", "console.js": "text/javascript"}
    if name not in kinds:
        raise web.HTTPNotFound()
    return web.Response(
        body=(STATIC / name).read_bytes(), content_type=kinds[name], charset="utf-8"
    )


def create_console_app(
    settings: AdmissionSettings,
    client: RedisClient,
    archive: asyncpg.Pool | None = None,
    directory: Directory | None = None,
) -> web.Application:
    """``directory``: the one admission asks (a login is resolved by it); None: the Redis
    stand-in on ``client``, as admission has without ``RESETGATE_DIRECTORY_URL``."""
    # Outermost first: every answer gets the headers, errors become pages, then auth.
    app = web.Application(
        middlewares=[security_headers, html_errors, authenticate], client_max_size=MAX_FORM_BYTES
    )
    app[SETTINGS] = settings
    app[REDIS] = client
    app[EVIDENCE] = Evidence(client, archive, settings.partitions)
    if directory is None and settings.directory_url:
        raise TypeError("the console resolves logins with admission's directory: pass it")
    app[DIRECTORY] = directory if directory is not None else RedisDirectory(client)
    app[CSRF_KEY] = csrf_key(settings.internal_api_token.get_secret_value())
    # Token sign-in attempts per client address, counted before the token is looked at, so a
    # limited client learns nothing about the token it sent.
    app[SIGN_IN_LIMITER] = IpLimiter(
        client,
        settings.console_sign_in_per_minute,
        settings.console_sign_in_burst,
        key=keys.console_sign_in_limit,
    )
    router = app.router
    router.add_get("/", _root)
    router.add_get("/console", _root)
    router.add_get(PREFIX, overview.home)
    router.add_get("/console/overview/live", overview.live)
    router.add_get("/console/audit", trail.trail_page)
    router.add_post("/console/find", find.find)
    router.add_get("/console/operations/{operation_id}", views.operation_page)
    router.add_get("/console/accounts/{account_id}", views.account_page)
    router.add_get("/console/oldest", oncall.oldest)
    router.add_get("/console/oldest/live", oncall.oldest_live)
    router.add_get("/console/providers", oncall.providers)
    router.add_get("/console/static/{name}", _static)
    forms.add_routes(app)
    provider_forms.add_routes(app)
    return app


TRIM_EVERY_SECONDS = 3600.0


async def _keep_trail(client: RedisClient, retention_days: float, stop: asyncio.Event) -> None:
    """Forget operator actions older than the retention, now and every hour, until stopped."""
    while not stop.is_set():
        try:
            trimmed = await actions.trim(client, retention_days)
            if trimmed:
                event(log, logging.INFO, "audit trail trimmed", entries=trimmed)
        except (RedisError, *TRANSIENT_ERRORS) as error:
            event(log, logging.WARNING, "audit trim failed", error=type(error).__name__)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), TRIM_EVERY_SECONDS)


def console_worker(
    settings: AdmissionSettings,
    client: RedisClient,
    archive: asyncpg.Pool | None,
    directory: Directory,
) -> Worker:
    """The console listener as a service worker: up with the service, down on SIGTERM."""

    async def console(stop: asyncio.Event) -> None:
        runner = web.AppRunner(
            create_console_app(settings, client, archive, directory),
            access_log=None,
            shutdown_timeout=5.0,
            **http_limits(settings),
        )
        await runner.setup()
        site = web.TCPSite(runner, settings.console_host, settings.console_port)
        await site.start()
        event(log, logging.INFO, "console listening", port=settings.console_port)
        try:
            async with asyncio.TaskGroup() as loops:
                loops.create_task(_keep_trail(client, settings.audit_retention_days, stop))
                loops.create_task(charts.keep_sampling(client, settings, stop))
        finally:
            await runner.cleanup()

    return console

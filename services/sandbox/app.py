"""``create_app``: the sandbox email provider as an aiohttp application."""

from __future__ import annotations

import logging
from pathlib import Path

from aiohttp import web
from aiohttp.typedefs import Handler

from services.sandbox import account, control, inbox, modes, provider
from services.sandbox.dialects import DIALECTS
from services.sandbox.keep import keep
from services.sandbox.logs import log
from services.sandbox.responses import SANDBOX, error, json_response
from services.sandbox.settings import SandboxSettings
from services.sandbox.state import Sandbox, running

# Only provider traffic counts as "requests": a test reading stats must not skew them.
_NOT_PROVIDER = ("/_sandbox", "/healthz", "/readyz")


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Counts provider requests by route and status; turns every failure into JSON."""
    counted = not request.path.startswith(_NOT_PROVIDER)
    stats = request.app[SANDBOX].stats
    if counted:
        stats.requests_total += 1
        resource = request.match_info.route.resource
        route = resource.canonical if resource is not None else "unmatched"
        stats.requests_by_route[f"{request.method} {route}"] += 1
    try:
        response = await handler(request)
    except web.HTTPException as exc:  # router 404/405 and the like
        response = error(exc.status, "http_error", exc.reason)
    except Exception:
        log("sandbox.handler.failed", logging.ERROR, path=request.path, exc_info=True)
        response = error(500, "internal_error", "the sandbox failed to handle this request")
    if counted:
        stats.responses_by_status[response.status] += 1
    return response


async def healthz(_: web.Request) -> web.Response:
    return json_response({"status": "ok"})


def create_app(settings: SandboxSettings) -> web.Application:
    # Bodies are read with our own limit (max_body_bytes can change at runtime).
    app = web.Application(middlewares=[json_errors], client_max_size=2**31)
    app[SANDBOX] = sandbox = Sandbox(settings)
    app.cleanup_ctx.append(running(sandbox.stalls.run))
    if settings.messages_file:
        app.cleanup_ctx.append(keep(sandbox, Path(settings.messages_file)))
    if settings.mode == "http":
        provider.add_routes(app)
    else:
        modes.add_routes(app, DIALECTS[settings.mode])
        account.add_routes(app, settings.mode, DIALECTS[settings.mode])
    control.add_routes(app)
    inbox.add_routes(app)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", healthz)
    return app

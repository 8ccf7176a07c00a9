"""``create_app``: the admission service as an aiohttp application; ``wire`` and ``main``."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from aiohttp import web

from services.admission import internal, resetpage
from services.admission.budget import PublicBudget
from services.admission.console.app import console_worker
from services.admission.context import (
    BUDGET,
    DIRECTORY,
    EVIDENCE,
    GATE,
    LIMITER,
    OPENAPI,
    REDIS,
    SETTINGS,
    TOKEN_KEYS,
)
from services.admission.gate import Gate
from services.admission.http import internal_auth, json_errors
from services.admission.openapi import document
from services.admission.public import password_reset
from services.admission.ratelimit import IpLimiter
from services.admission.settings import AdmissionSettings
from shared import codec, metrics, service
from shared.archive import Evidence, maybe_pool
from shared.directory import Directory, open_directory
from shared.fastredis import fast_client
from shared.logging import event
from shared.redis import RedisClient, ping
from shared.service import ReadinessCheck, instrument
from shared.tokens import parse_keys

SERVICE = "admission"
log = logging.getLogger("services.admission")


async def openapi_json(request: web.Request) -> web.Response:
    return web.Response(body=request.app[OPENAPI], content_type="application/json")


def create_app(
    settings: AdmissionSettings,
    client: RedisClient,
    directory: Directory,
    archive: asyncpg.Pool | None = None,
) -> web.Application:
    """The app; the caller owns ``client``, ``directory`` and ``archive`` (the evidence
    archive's pool, None: Redis only) and closes them after cleanup."""
    app = web.Application(
        # Outermost first: latency covers everything, auth runs before any body is read.
        middlewares=[instrument(SERVICE), json_errors, internal_auth],
        client_max_size=settings.max_body_bytes,
    )
    keys = parse_keys(settings.token_keys.get_secret_value())
    app[SETTINGS] = settings
    app[REDIS] = client
    app[DIRECTORY] = directory
    app[EVIDENCE] = Evidence(client, archive, settings.partitions)
    app[TOKEN_KEYS] = keys
    app[GATE] = Gate(client, settings, keys, settings.wait_replicas, settings.wait_timeout_ms)
    app[BUDGET] = PublicBudget(
        client, settings.provider_name, settings.public_budget_reserved_share
    )
    app[LIMITER] = IpLimiter(client, settings.ip_limit_per_minute, settings.ip_limit_burst)
    app[OPENAPI] = codec.dumps(document())
    app.cleanup_ctx.append(_gate_lifecycle)
    metrics.token_ttl.set(settings.token_ttl_seconds)
    # Redis answered before the app was built; the readiness probe keeps this current. The
    # series must exist from the start: AdmissionUnavailable pages on its absence.
    metrics.redis_up.labels(SERVICE).set(1)
    app.router.add_post("/v1/password-resets", password_reset)
    internal.add_routes(app)
    app.router.add_get("/openapi.json", openapi_json)
    if settings.local_reset_page:
        resetpage.add_routes(app)
    return app


def readiness(client: RedisClient) -> ReadinessCheck:
    """What ``/readyz`` on the operational listener asks once admission has its store."""

    async def check() -> dict[str, bool]:
        up = await ping(client)
        metrics.redis_up.labels(SERVICE).set(1 if up else 0)
        return {"redis": up}

    return check


async def _gate_lifecycle(app: web.Application) -> AsyncIterator[None]:
    yield
    await app[GATE].close()  # per-node connections opened for WAIT on Cluster


@asynccontextmanager
async def wire(settings: AdmissionSettings, client: RedisClient) -> AsyncIterator[service.Wiring]:
    # Public requests' commands on FastRedis's one pipelined link (standalone Redis, unless
    # RESETGATE_FAST_REDIS=false: then the plain client itself).
    pipelined: RedisClient = fast_client(client, settings.fast_redis)
    try:
        async with (
            open_directory(settings, pipelined) as directory,
            maybe_pool(settings) as archive,
        ):
            event(
                log,
                logging.INFO,
                "admission configured",
                partitions=settings.partitions,
                cluster=settings.redis_cluster,
                wait_replicas=settings.wait_replicas,
                ip_limit_per_minute=settings.ip_limit_per_minute,
                directory="http" if settings.directory_url else "redis",
                console=settings.console_port is not None,
                fast_redis=pipelined is not client,
                archive="postgresql" if archive else "none: retention is Redis-only",
            )
            app = create_app(settings, pipelined, directory, archive)
            # The console (when configured): its own listener, and the plain client, so its
            # occasional scans never queue behind public requests on the pipelined link.
            workers = (
                [console_worker(settings, client, archive, directory)]
                if settings.console_port is not None
                else []
            )
            yield service.Wiring(workers, readiness(pipelined), public=(app, settings.http_port))
    finally:
        if pipelined is not client:
            await pipelined.aclose()


def main() -> None:
    service.main(SERVICE, AdmissionSettings, wire)


if __name__ == "__main__":
    main()

"""``python -m services.admission``: settings, logging, Redis, the directory, then serve."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp

from services.admission.app import SERVICE, create_app, readiness
from services.admission.console.app import console_worker
from services.admission.fastredis import fast_client
from services.admission.settings import AdmissionSettings
from shared import logging as jsonlog
from shared.directory import Directory, HttpDirectory, RedisDirectory
from shared.logging import event
from shared.redis import RedisClient, connect
from shared.service import Operational, operational, run, serve
from shared.settings import load

log = logging.getLogger("services.admission")


@asynccontextmanager
async def open_directory(
    settings: AdmissionSettings, client: RedisClient
) -> AsyncIterator[Directory]:
    """The studio's directory over HTTP when configured, else the Redis one."""
    if settings.directory_url is None:
        yield RedisDirectory(client)
        return
    async with aiohttp.ClientSession() as session:
        yield HttpDirectory(session, settings.directory_url, settings.directory_timeout_seconds)


async def main() -> None:
    settings = load(AdmissionSettings)
    jsonlog.setup(SERVICE, settings.log_level)
    async with operational(SERVICE, settings) as ops:
        await _run(settings, ops)


async def _run(settings: AdmissionSettings, ops: Operational) -> None:
    client = await connect(settings)
    # The hot path's commands, pipelined (standalone, unless RESETGATE_FAST_REDIS=false).
    hot: RedisClient = fast_client(client, settings.fast_redis)
    try:
        async with open_directory(settings, hot) as directory:
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
                fast_redis=hot is not client,
            )
            ops.ready_when(readiness(hot))
            app = create_app(settings, hot, directory)
            # The console (when configured): its own listener, and the plain client, so its
            # occasional scans never queue behind the public hot path's pipelined link.
            workers = (
                [console_worker(settings, client)] if settings.console_port is not None else []
            )
            await serve(SERVICE, settings, workers, public=(app, settings.http_port))
    finally:
        if hot is not client:
            await hot.aclose()
        await client.aclose()


if __name__ == "__main__":
    run(main)

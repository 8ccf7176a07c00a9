"""Wiring: settings -> Redis, directory, the admission gate -> the router's loops."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import aiohttp

from services.router.settings import RouterSettings
from services.router.worker import Router, ensure_group
from shared import logging as rglogging
from shared import metrics, service
from shared import settings as settings_module
from shared.admit import Admitter
from shared.directory import Directory, HttpDirectory, RedisDirectory
from shared.loops import resilient
from shared.redis import RedisClient, connect, ping, until_done
from shared.tokens import parse_keys

SERVICE = "router"


@asynccontextmanager
async def open_directory(settings: RouterSettings, client: RedisClient) -> AsyncIterator[Directory]:
    """The studio's directory over HTTP when configured, else the Redis one."""
    if not settings.directory_url:
        yield RedisDirectory(client)
        return
    async with aiohttp.ClientSession() as session:
        yield HttpDirectory(session, settings.directory_url, settings.directory_timeout_seconds)


def build_router(settings: RouterSettings, client: RedisClient, directory: Directory) -> Router:
    keys = parse_keys(settings.token_keys.get_secret_value())
    return Router(settings, client, directory, Admitter(client, settings, keys))


def workers(router: Router) -> list[service.Worker]:
    return [_loop("read", router.read_step), _loop("claim", router.claim_step)]


def _loop(name: str, step: Callable[[], Awaitable[float]]) -> service.Worker:
    async def loop(stop: asyncio.Event) -> None:
        await resilient(SERVICE, name, stop, step)

    loop.__name__ = name
    return loop


def readiness(client: RedisClient) -> service.ReadinessCheck:
    async def check() -> dict[str, bool]:
        up = await ping(client)
        metrics.redis_up.labels(SERVICE).set(int(up))
        return {"redis": up}

    return check


async def run(settings: RouterSettings) -> None:
    async with service.operational(SERVICE, settings) as ops:
        client = await connect(settings)
        await until_done(lambda: ensure_group(client), "contact form group")
        async with open_directory(settings, client) as directory:
            router = build_router(settings, client, directory)
            ops.ready_when(readiness(client))
            await service.serve(SERVICE, settings, workers(router))
        await client.aclose()


def main() -> None:
    settings = settings_module.load(RouterSettings)
    rglogging.setup(SERVICE, settings.log_level)
    service.run(lambda: run(settings))


if __name__ == "__main__":
    main()

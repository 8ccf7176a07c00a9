"""Wiring: settings -> Redis, directory, the admission gate -> the router's loops."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from services.router.settings import RouterSettings
from services.router.worker import Router, ensure_group
from shared import service
from shared.admit import Admitter
from shared.directory import Directory, open_directory
from shared.loops import named_loop
from shared.redis import RedisClient, until_done
from shared.tokens import parse_keys

SERVICE = "router"


def build_router(settings: RouterSettings, client: RedisClient, directory: Directory) -> Router:
    keys = parse_keys(settings.token_keys.get_secret_value())
    return Router(settings, client, directory, Admitter(client, settings, keys))


def workers(router: Router) -> list[service.Worker]:
    return [
        named_loop(SERVICE, "read", router.read_step),
        named_loop(SERVICE, "claim", router.claim_step),
    ]


@asynccontextmanager
async def wire(settings: RouterSettings, client: RedisClient) -> AsyncIterator[service.Wiring]:
    await until_done(lambda: ensure_group(client), "contact form group")
    async with open_directory(settings, client) as directory:
        router = build_router(settings, client, directory)
        yield service.Wiring(workers(router), service.redis_readiness(SERVICE, client))


def main() -> None:
    service.main(SERVICE, RouterSettings, wire)


if __name__ == "__main__":
    main()

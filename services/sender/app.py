"""Wiring: settings -> Redis, provider session, directory -> the sender's loops."""

from __future__ import annotations

import functools

import aiohttp
from aiohttp import web

from services.sender.attempt import AttemptRunner
from services.sender.pacer import Pacer
from services.sender.settings import SenderSettings
from services.sender.worker import Sender, ensure_groups
from shared import logging as rglogging
from shared import metrics, service
from shared import settings as settings_module
from shared.directory import Directory, HttpDirectory, RedisDirectory
from shared.provider import HttpProvider
from shared.redis import RedisClient, connect, ping, until_done
from shared.tokens import parse_keys


def build_sender(
    settings: SenderSettings, client: RedisClient, session: aiohttp.ClientSession
) -> Sender:
    directory: Directory = (
        HttpDirectory(session, settings.directory_url, settings.directory_timeout_seconds)
        if settings.directory_url
        else RedisDirectory(client)
    )
    provider = HttpProvider(
        session,
        settings.provider_url,
        settings.provider_api_key.get_secret_value(),
        connect_timeout=settings.connect_timeout_seconds,
        total_timeout=settings.total_timeout_seconds,
    )
    pacer = Pacer(
        client,
        settings.provider_name,
        ceiling=settings.provider_max_rate,
        floor=settings.provider_min_rate,
        burst=settings.provider_burst,
    )
    keys = parse_keys(settings.token_keys.get_secret_value())
    runner = AttemptRunner(settings, client, provider, directory, keys, pacer)
    return Sender(settings, client, runner)


def workers(sender: Sender) -> list[service.Worker]:
    loops: list[service.Worker] = [sender.gauges, sender.promote]
    for p in range(sender.settings.partitions):
        loops.append(functools.partial(sender.read_partition, p))
        loops.append(functools.partial(sender.claim_partition, p))
    loops.extend(sender.work for _ in range(sender.settings.concurrency))
    loops.append(sender.hand_back_on_stop)
    for index, loop in enumerate(loops):  # names for logs when a loop crashes
        if isinstance(loop, functools.partial):
            loop.__name__ = f"{loop.func.__name__}:{index}"  # type: ignore[attr-defined]
    return loops


def health_app(sender: Sender, client: RedisClient) -> web.Application:
    async def readiness() -> dict[str, bool]:
        return {"redis": await ping(client), "provider_credentials": sender.sending_allowed()}

    app = web.Application()
    service.add_operational_routes(app, readiness)
    return app


async def run(settings: SenderSettings) -> None:
    client = await connect(settings)
    await until_done(lambda: ensure_groups(client, settings.partitions), "send groups")
    metrics.token_ttl.set(settings.token_ttl_seconds)
    connector = aiohttp.TCPConnector(limit=settings.concurrency * 2, ttl_dns_cache=60)
    async with aiohttp.ClientSession(connector=connector) as session:
        sender = build_sender(settings, client, session)
        await until_done(sender.refresh_control, "control state")
        await service.serve("sender", settings, health_app(sender, client), workers(sender))
    await client.aclose()


def main() -> None:
    settings = settings_module.load(SenderSettings)
    rglogging.setup("sender", settings.log_level)
    service.run(lambda: run(settings))


if __name__ == "__main__":
    main()

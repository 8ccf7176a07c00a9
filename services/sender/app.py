"""Wiring: settings -> Redis, provider session, directory -> the sender's loops."""

from __future__ import annotations

import functools

import aiohttp

from services.sender.attempt import AttemptRunner
from services.sender.pacer import Pacer
from services.sender.settings import SenderSettings
from services.sender.worker import Sender, ensure_groups
from shared import logging as rglogging
from shared import metrics, service
from shared import settings as settings_module
from shared.directory import Directory, HttpDirectory, RedisDirectory
from shared.providers.base import Provider
from shared.providers.factory import ProviderConfig, build, open_provider
from shared.redis import RedisClient, connect, ping, until_done
from shared.tokens import parse_keys

SERVICE = "sender"


def build_sender(
    settings: SenderSettings,
    client: RedisClient,
    session: aiohttp.ClientSession,
    provider: Provider | None = None,
    provider_rate: float | None = None,
) -> Sender:
    """``provider_rate``: the account's maximum send rate where the provider reports one
    (SES); the pacing ceiling is then min(configured, provider's)."""
    directory: Directory = (
        HttpDirectory(session, settings.directory_url, settings.directory_timeout_seconds)
        if settings.directory_url
        else RedisDirectory(client)
    )
    if provider is None:
        provider = build(ProviderConfig.from_settings(settings), session)
    ceiling = min(settings.provider_max_rate, provider_rate or settings.provider_max_rate)
    pacer = Pacer(
        client,
        settings.provider_name,
        ceiling=ceiling,
        floor=min(settings.provider_min_rate, ceiling),
        burst=settings.provider_burst,
        max_wait=settings.max_advised_wait_seconds,
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


def readiness(sender: Sender, client: RedisClient) -> service.ReadinessCheck:
    async def check() -> dict[str, bool]:
        return {"redis": await ping(client), "provider_credentials": sender.sending_allowed()}

    return check


async def run(settings: SenderSettings) -> None:
    async with service.operational(SERVICE, settings) as ops:
        client = await connect(settings)
        await until_done(lambda: ensure_groups(client, settings.partitions), "send groups")
        metrics.token_ttl.set(settings.token_ttl_seconds)
        connector = aiohttp.TCPConnector(limit=settings.concurrency * 2, ttl_dns_cache=60)
        async with (
            aiohttp.ClientSession(connector=connector) as session,
            open_provider(ProviderConfig.from_settings(settings), session) as provider,
        ):
            rate = await provider.max_send_rate()
            sender = build_sender(settings, client, session, provider, rate)
            await until_done(sender.refresh_control, "control state")
            ops.ready_when(readiness(sender, client))
            await service.serve(SERVICE, settings, workers(sender))
        await client.aclose()


def main() -> None:
    settings = settings_module.load(SenderSettings)
    rglogging.setup(SERVICE, settings.log_level)
    service.run(lambda: run(settings))


if __name__ == "__main__":
    main()

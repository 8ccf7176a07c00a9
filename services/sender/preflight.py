"""The preflight in the sender: the checks of `resetgate providers check` (shared/preflight)
at start and every RESETGATE_PROVIDER_CHECK_INTERVAL_SECONDS, published as
``resetgate_provider_check{provider,check}`` and stored for ``ops status`` and the console.

Read-only calls only, a few per provider per interval. A failing check is logged (the check
and what to do, never an address) and alerted on (ProviderMisconfigured, a warning); it
never stops sending: the adapters' own classification decides what a refusal does.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import aiohttp

from shared import clock
from shared.logging import event
from shared.loops import named_loop
from shared.preflight import failing
from shared.preflight.run import run
from shared.preflight.store import publish, save
from shared.providers.base import Provider
from shared.providers.kind import ProviderConfig
from shared.redis import RedisClient
from shared.service import Worker
from shared.settings import EmailSettings

log = logging.getLogger(__name__)
SERVICE = "sender"


async def check_once(
    client: RedisClient,
    session: aiohttp.ClientSession,
    email: EmailSettings,
    providers: Sequence[tuple[ProviderConfig, Provider]],
) -> None:
    for config, provider in providers:
        checks = await run(config, provider, session, email)
        publish(checks)
        await save(client, config.name, checks, clock.now_ms())
        for bad in failing(checks):
            event(
                log,
                logging.WARNING,
                "provider check failed",
                provider=bad.provider,
                check=bad.check,
                fix=bad.detail,
            )


def preflight_loop(
    client: RedisClient,
    session: aiohttp.ClientSession,
    email: EmailSettings,
    providers: Sequence[tuple[ProviderConfig, Provider]],
    interval: float,
) -> Worker:
    """A worker that checks every provider now and every ``interval`` seconds."""

    async def step() -> float:
        await check_once(client, session, email, providers)
        return interval

    return named_loop(SERVICE, "provider_checks", step)

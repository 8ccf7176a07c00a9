"""Wiring: settings -> Redis, provider session -> the poller's loops, behind one lease.

Only the replica holding the lease calls the provider (feed, lookups, message reads) or
closes windows, so the provider sees one polling budget however many pods run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import aiohttp

from services.poller.budget import Budget
from services.poller.feed import Feed, ProviderCalls
from services.poller.inbound.ingest import Ingest
from services.poller.inbound.queue import SesQueue
from services.poller.inbound.webhooks import Webhooks
from services.poller.observer import Observer
from services.poller.reconciler import Reconciler
from services.poller.settings import PollerSettings
from shared import metrics, observation, service
from shared.logging import event
from shared.loops import ERRORS, named, named_loop, resilient
from shared.providers.base import Provider
from shared.providers.factory import ProviderConfig, build, open_provider
from shared.providers.named import load_or_exit
from shared.redis import RedisClient, ping

log = logging.getLogger(__name__)
SERVICE = "poller"


class Leadership:
    def __init__(self, client: RedisClient, holder: str, lease_seconds: float) -> None:
        self.client = client
        self.holder = holder
        self.lease_ms = int(lease_seconds * 1000)
        self.active = False

    async def renew(self) -> float:
        try:
            held = await observation.hold_lease(self.client, self.holder, self.lease_ms)
        except ERRORS:
            self.active = False  # cannot prove we hold it: stop calling the provider
            raise
        if held != self.active:
            event(log, logging.INFO, "poller lease " + ("taken" if held else "lost"),
                  holder=self.holder)  # fmt: skip
        self.active = held
        metrics.redis_up.labels(SERVICE).set(1)
        return self.lease_ms / 3000

    def gated(self, step: Callable[[], Awaitable[float]]) -> Callable[[], Awaitable[float]]:
        async def run() -> float:
            return await step() if self.active else 0.5

        return run


@dataclass
class Poller:
    settings: PollerSettings
    client: RedisClient
    calls: ProviderCalls
    observer: Observer
    feed: Feed
    reconciler: Reconciler
    leadership: Leadership
    webhooks: Webhooks | None = None
    queue: SesQueue | None = None
    pending_observations: int = 0

    async def close_step(self) -> float:
        await self.observer.close_windows()
        self.pending_observations = await self.observer.publish_pending()
        return self.settings.close_interval_seconds

    def stalled(self) -> bool:
        """The lease holder has work waiting on the provider (delivery events, lookups) and
        no events page or lookup succeeded for RESETGATE_POLL_STALL_SECONDS."""
        waiting = self.pending_observations + self.reconciler.waiting
        too_long = self.calls.stalled_for() > self.settings.poll_stall_seconds
        return self.leadership.active and waiting > 0 and too_long

    async def gc_step(self) -> float:
        await self.observer.collect_garbage()
        return self.settings.gc_interval_seconds


def build_poller(
    settings: PollerSettings, client: RedisClient, session: aiohttp.ClientSession,
    provider: Provider | None = None,
) -> Poller:  # fmt: skip
    if provider is None:
        provider = build(ProviderConfig.from_settings(settings), session)
    budget = Budget(settings.poll_max_requests_per_minute, settings.poll_burst,
                    settings.poll_backoff_cap_seconds)  # fmt: skip
    calls = ProviderCalls(provider, budget, settings.max_advised_wait_seconds)
    observer = Observer(client, settings)
    ingest = Ingest(client, settings)
    return Poller(
        settings, client, calls, observer, Feed(client, calls, observer, settings),
        Reconciler(client, calls, observer, settings),
        Leadership(client, settings.consumer_name, settings.lease_seconds),
        Webhooks(settings, client, ingest) if settings.webhooks_enabled else None,
        SesQueue(settings, ingest) if settings.ses_queue_url else None,
    )  # fmt: skip


def workers(poller: Poller) -> list[service.Worker]:
    lead = poller.leadership
    loops = {
        "feed": lead.gated(poller.feed.step),
        "reconcile": lead.gated(poller.reconciler.step),
        "close": lead.gated(poller.close_step),
        "gc": lead.gated(poller.gc_step),
    }

    async def lease(stop: asyncio.Event) -> None:
        await resilient(SERVICE, "lease", stop, lead.renew)
        with contextlib.suppress(*ERRORS):  # unreleased, it runs out by itself
            await observation.release_lease(poller.client, lead.holder)

    result: list[service.Worker] = [named("lease", lease)]
    result.extend(named_loop(SERVICE, name, step) for name, step in loops.items())
    # Pushed events are taken by every replica, not only the lease holder: the provider
    # spreads its requests (and SQS its messages) over them, and applying is idempotent.
    if poller.webhooks is not None:
        result.append(named("webhooks", poller.webhooks.serve))
    if poller.queue is not None:
        result.append(named("ses-queue", poller.queue.serve))
    return result


def readiness(poller: Poller) -> service.ReadinessCheck:
    async def check() -> dict[str, bool]:
        checks = {"redis": await ping(poller.client),
                  "provider_credentials": poller.calls.credentials_ok,
                  "provider_answering": not poller.stalled()}  # fmt: skip
        if poller.webhooks is not None:
            checks["webhook_listener"] = poller.webhooks.listening.is_set()
        return checks

    return check


def reconciling_provider(settings: PollerSettings) -> tuple[PollerSettings, ProviderConfig]:
    """With several providers the poller works with the first listed only (one poller per
    provider is not built yet); operations held by another provider wait for it, never
    looked up here (services.poller.ambiguity)."""
    first = load_or_exit(settings)[0].config
    return settings.model_copy(update={"provider_name": first.name}), first


@asynccontextmanager
async def wire(settings: PollerSettings, client: RedisClient) -> AsyncIterator[service.Wiring]:
    settings, config = reconciling_provider(settings)
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=8)) as session,
        open_provider(config, session) as provider,
    ):
        poller = build_poller(settings, client, session, provider)
        yield service.Wiring(workers(poller), readiness(poller))


def main() -> None:
    # A bad provider setting stops the process before anything starts.
    service.main(SERVICE, PollerSettings, wire, check=load_or_exit)


if __name__ == "__main__":
    main()

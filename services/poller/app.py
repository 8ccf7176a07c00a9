"""Wiring: settings -> Redis, provider sessions -> the poller's loops, behind one lease.

Only the replica holding the lease calls a provider (feed, lookups, message reads) or
closes windows, so each provider sees one polling budget however many pods run. Each
configured provider (``RESETGATE_PROVIDERS``) is a :class:`PolledProvider`: budget, feed
cursor, lookups of the ambiguous attempts it holds, credentials and stall clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import aiohttp

from services.poller.budget import Budget
from services.poller.feed import Feed, ProviderCalls
from services.poller.inbound.ingest import Ingest
from services.poller.inbound.queue import SesQueue
from services.poller.inbound.sources import queue_sources, sources, switched_on, webhook_sources
from services.poller.inbound.webhooks import Webhooks
from services.poller.observer import Observer
from services.poller.reconciler import Reconciler
from services.poller.settings import PollerSettings
from shared import metrics, service
from shared.logging import event
from shared.loops import ERRORS, Step, named, named_loop
from shared.providers.base import Provider
from shared.providers.kind import ProviderConfig
from shared.providers.named import ProviderConfigError, load_or_exit
from shared.providers.registry import open_provider
from shared.providers.ses import SesSettings
from shared.redis import RedisClient, ping
from shared.scripts.observation import Lease
from shared.settings import read_kind

log = logging.getLogger(__name__)
SERVICE = "poller"


class Leadership:
    def __init__(self, client: RedisClient, holder: str, lease_ms: int) -> None:
        self.client = client
        self.holder = holder
        self.lease_ms = lease_ms
        self.active = False

    async def renew(self) -> float:
        try:
            held = await Lease(holder=self.holder, lease_ms=self.lease_ms).run(self.client)
        except ERRORS:
            self.active = False  # cannot prove we hold it: stop calling the provider
            raise
        if held != self.active:
            event(
                log,
                logging.INFO,
                "poller lease " + ("taken" if held else "lost"),
                holder=self.holder,
            )
        self.active = held
        metrics.redis_up.labels(SERVICE).set(1)
        return self.lease_ms / 3000

    @asynccontextmanager
    async def holding(self, _stop: asyncio.Event) -> AsyncIterator[Step]:
        """The lease loop's step; the lease is released once the loop ends at shutdown."""
        yield self.renew
        with contextlib.suppress(*ERRORS):  # unreleased, it runs out by itself
            await Lease(holder=self.holder, release=True).run(self.client)

    def gated(self, step: Callable[[], Awaitable[float]]) -> Callable[[], Awaitable[float]]:
        async def run() -> float:
            return await step() if self.active else 0.5

        return run


@dataclass(frozen=True, slots=True)
class PolledProvider:
    """One provider's side of the poller: its own request budget, feed and cursor, the
    ambiguous attempts it holds, its credentials and its stall clock."""

    calls: ProviderCalls
    feed: Feed
    reconciler: Reconciler

    @property
    def name(self) -> str:
        return self.calls.name

    def waiting(self, pending_observations: int) -> int:
        """Work waiting on this provider: lookups, and delivery events if it has a feed."""
        pending = pending_observations if self.calls.feed is not None else 0
        return self.reconciler.waiting + pending


@dataclass
class Poller:
    settings: PollerSettings
    client: RedisClient
    polled: list[PolledProvider]
    observer: Observer
    leadership: Leadership
    webhooks: Webhooks | None = None
    queues: list[SesQueue] = field(default_factory=list)  # one per SES source
    pending_observations: int = 0

    async def close_step(self) -> float:
        await self.observer.close_windows()
        self.pending_observations = await self.observer.publish_pending()
        return self.settings.close_interval_seconds

    def stalled(self) -> bool:
        """The lease holder has work waiting on a provider (delivery events, lookups) and
        no events page or lookup with it succeeded for RESETGATE_POLL_STALL_SECONDS."""
        limit = self.settings.poll_stall_seconds
        stalled = any(
            polled.waiting(self.pending_observations) > 0 and polled.calls.stalled_for() > limit
            for polled in self.polled
        )
        return self.leadership.active and stalled

    def credentials_ok(self) -> bool:
        """At least one provider takes the poller's key (as for the senders: one rejected
        key must not take the webhook listener of every provider out of service)."""
        return any(polled.calls.credentials_ok for polled in self.polled)

    async def gc_step(self) -> float:
        await self.observer.collect_garbage()
        return self.settings.gc_interval_seconds


def _configuration_set(settings: PollerSettings) -> str:
    """RESETGATE_SES_CONFIGURATION_SET (the process's own account's when it is of kind ses)."""
    own = settings.kind_settings
    return (own if isinstance(own, SesSettings) else read_kind(SesSettings)).ses_configuration_set


def build_poller(
    settings: PollerSettings,
    client: RedisClient,
    providers: Sequence[Provider],
    configured: Sequence[ProviderConfig],
) -> Poller:
    """One :class:`PolledProvider` per provider in ``providers`` (the first listed first).
    ``configured``: their settings, for the pushed-event sources of each name
    (inbound/sources.py)."""
    observer = Observer(client, settings)
    names = tuple(p.name for p in providers)
    polled = [_polled(settings, client, observer, p, names) for p in providers]
    ingest = Ingest(client, settings)
    found = sources(settings, configured)
    hooks = webhook_sources(found)
    queues = queue_sources(found)
    if switched_on("ses", settings.inbound("ses")) and not _configuration_set(settings):
        event(
            log,
            logging.WARNING,
            "SES queue set without RESETGATE_SES_CONFIGURATION_SET: "
            "SES publishes events only for messages sent with a configuration set, so none "
            "will arrive and an ambiguous SES send is never settled",
            setting="RESETGATE_SES_CONFIGURATION_SET",
        )
    return Poller(
        settings,
        client,
        polled,
        observer,
        Leadership(client, settings.consumer_name, settings.lease_ms),
        Webhooks(settings, client, ingest, hooks) if hooks else None,
        [SesQueue(settings, ingest, source) for source in queues],
    )


def _polled(
    settings: PollerSettings,
    client: RedisClient,
    observer: Observer,
    provider: Provider,
    names: tuple[str, ...],
) -> PolledProvider:
    budget = Budget(
        settings.poll_max_requests_per_minute,
        settings.poll_burst,
        settings.poll_backoff_cap_seconds,
    )
    calls = ProviderCalls(provider, budget, settings.max_advised_wait_seconds)
    first = provider.name == names[0]
    return PolledProvider(
        calls,
        Feed(client, calls, observer, settings, first=first),
        Reconciler(client, calls, observer, settings, names=names),
    )


def workers(poller: Poller) -> list[service.Worker]:
    lead = poller.leadership
    loops: dict[str, Callable[[], Awaitable[float]]] = {}
    for polled in poller.polled:
        loops[f"feed:{polled.name}"] = lead.gated(polled.feed.step)
        loops[f"reconcile:{polled.name}"] = lead.gated(polled.reconciler.step)
    loops |= {"close": lead.gated(poller.close_step), "gc": lead.gated(poller.gc_step)}

    result = [named_loop(SERVICE, "lease", opened=lead.holding)]
    result.extend(named_loop(SERVICE, name, step) for name, step in loops.items())
    # Pushed events are taken by every replica, not only the lease holder: the provider
    # spreads its requests (and SQS its messages) over them, and applying is idempotent.
    if poller.webhooks is not None:
        result.append(named("webhooks", poller.webhooks.serve))
    for queue in poller.queues:
        name = "ses-queue" if queue.source.providers is None else f"ses-queue:{queue.source.route}"
        result.append(named_loop(SERVICE, name, opened=queue.receiving))
    return result


def readiness(poller: Poller) -> service.ReadinessCheck:
    async def check() -> dict[str, bool]:
        checks = {
            "redis": await ping(poller.client),
            "provider_credentials": poller.credentials_ok(),
            "provider_answering": not poller.stalled(),
        }
        if poller.webhooks is not None:
            checks["webhook_listener"] = poller.webhooks.listening.is_set()
        return checks

    return check


@asynccontextmanager
async def wire(settings: PollerSettings, client: RedisClient) -> AsyncIterator[service.Wiring]:
    configured = load_or_exit(settings)
    connector = aiohttp.TCPConnector(limit=8 * len(configured))
    async with (
        aiohttp.ClientSession(connector=connector) as session,
        contextlib.AsyncExitStack() as stack,
    ):
        providers = await open_all(stack, session, configured)
        poller = build_poller(settings, client, providers, configured)
        yield service.Wiring(workers(poller), readiness(poller))


async def open_all(
    stack: contextlib.AsyncExitStack,
    session: aiohttp.ClientSession,
    configured: Sequence[ProviderConfig],
) -> list[Provider]:
    """Every configured provider's adapter, the first listed first; ``stack`` closes them."""
    return [await stack.enter_async_context(open_provider(c, session)) for c in configured]


def check(settings: PollerSettings) -> list[ProviderConfig]:
    """The configured providers and their pushed-event sources, or exit naming the variable."""
    configured = load_or_exit(settings)
    try:
        sources(settings, configured)
    except ProviderConfigError as error:
        print(f"invalid configuration: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    return configured


def main() -> None:
    # A bad provider setting stops the process before anything starts.
    service.main(SERVICE, PollerSettings, wire, check=check)


if __name__ == "__main__":
    main()

"""Wiring: settings -> Redis, provider session, directory -> the sender's loops."""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

import aiohttp

from services.sender import failover
from services.sender.attempt import AttemptRunner
from services.sender.guard import RefusalGuard
from services.sender.health import ProviderHealth
from services.sender.intake import ensure_groups
from services.sender.message import Messages
from services.sender.pacer import Pacer
from services.sender.preflight import preflight_loop
from services.sender.settings import SenderSettings
from services.sender.worker import Sender
from shared import metrics, service
from shared.directory import directory_for
from shared.emails import check
from shared.emails.compose import Hosted, Mailer, hosted_problem
from shared.fastredis import fast_client
from shared.loops import named_loop
from shared.preflight import Check
from shared.preflight.run import run as preflight_run
from shared.progressive import Limits
from shared.progressive_run import Driver
from shared.providers.base import Provider
from shared.providers.kind import ProviderConfig
from shared.providers.named import ProviderConfigError, load_or_exit, provider_names, variable
from shared.providers.registry import open_provider
from shared.quota import HasDailyQuota, publish, quota_for
from shared.redis import RedisClient, ping, until_done
from shared.redis_policy import (
    StoreNotDurable,
    check_keyless_durability,
    check_keyless_replication,
)
from shared.replication import Replicas
from shared.settings import ENV_PREFIX
from shared.tokens import parse_keys

SERVICE = "sender"


@dataclass(frozen=True, slots=True)
class Opened:
    """One configured provider with its adapter open (``RESETGATE_PROVIDERS``)."""

    config: ProviderConfig
    provider: Provider
    provider_rate: float | None  # the account's maximum send rate, where the provider says
    daily_quota: float | None = None  # sends per 24 h, where the provider says (SES)


def build_sender(
    settings: SenderSettings,
    client: RedisClient,
    session: aiohttp.ClientSession,
    opened: Sequence[Opened],
    replicas: Replicas | None = None,
    mailer: Mailer | None = None,
) -> Sender:
    """One runner per provider in ``opened``, the first serving every partition not
    switched away. ``mailer``: the checked templates and brands (None: read and checked
    here)."""
    directory = directory_for(settings, client, session)
    keys = parse_keys(settings.token_keys.get_secret_value())
    replicas = replicas or Replicas(
        client, settings, settings.wait_replicas, settings.wait_timeout_ms
    )
    mailer = mailer or check.load(settings)
    runners = [
        AttemptRunner(
            settings,
            client,
            o.provider,
            _health(settings, client, o),
            Messages(client, directory, keys, mailer, hosted(o.config, settings.default_locale)),
            _pacer(settings, client, o.config.name, o.config.max_rate, o.provider_rate),
            replicas,
        )
        for o in opened
    ]
    return Sender(settings, client, runners)


def _health(settings: SenderSettings, client: RedisClient, opened: Opened) -> ProviderHealth:
    config = opened.config
    guard = RefusalGuard(settings.refusal_guard_operations, settings.refusal_guard_window_ms)
    quota = quota_for(
        config.name, opened.daily_quota, settings.provider_daily_quota, settings.quota_window_ms
    )
    return ProviderHealth(client, config.name, config.api_key, guard, quota)


def hosted(config: ProviderConfig, default_locale: str) -> Hosted | None:
    """The provider-hosted template this provider sends, or None (the local files)."""
    if not config.template:
        return None
    listed = tuple(x.strip() for x in config.template_locales.split(",") if x.strip())
    return Hosted(config.kind, config.template, listed or (default_locale,))


def _pacer(
    settings: SenderSettings,
    client: RedisClient,
    name: str,
    max_rate: float | None,
    provider_rate: float | None,
) -> Pacer:
    configured = max_rate or settings.provider_max_rate
    ceiling = min(configured, provider_rate or configured)
    return Pacer(
        client,
        name,
        ceiling=ceiling,
        floor=min(settings.provider_min_rate, ceiling),
        burst=settings.provider_burst,
        max_wait=settings.max_advised_wait_seconds,
    )


def workers(sender: Sender) -> list[service.Worker]:
    intake = sender.intake
    loops = [
        named_loop(SERVICE, "gauges", sender.gauges_step),
        named_loop(SERVICE, "promote", sender.promote_step),
        named_loop(SERVICE, "renew", intake.renew_step),
    ]
    for p in range(sender.settings.partitions):
        read, claim = functools.partial(intake.reading, p), functools.partial(intake.claiming, p)
        loops += [
            named_loop(SERVICE, f"read:{p}", opened=read),
            named_loop(SERVICE, f"claim:{p}", opened=claim),
        ]
    loops.extend(sender.work for _ in range(sender.settings.concurrency))
    loops.append(intake.hand_back_on_stop)
    return loops


def readiness(sender: Sender, client: RedisClient) -> service.ReadinessCheck:
    """Ready when its store answers. Never a provider pause: a paused provider is the same
    for every replica, and a sender that reports itself unready over it stalls a restart or
    rollout while fixing nothing (the pause shows in ``ops status``, metrics and the page)."""

    async def check() -> dict[str, bool]:
        return {"redis": await ping(client)}

    return check


@asynccontextmanager
async def wire(settings: SenderSettings, client: RedisClient) -> AsyncIterator[service.Wiring]:
    await until_done(lambda: ensure_groups(client, settings.partitions), "send groups")
    metrics.token_ttl.set(settings.token_ttl_seconds)
    connector = aiohttp.TCPConnector(limit=settings.concurrency * 2, ttl_dns_cache=60)
    async with (
        aiohttp.ClientSession(connector=connector) as session,
        contextlib.AsyncExitStack() as stack,
    ):
        opened = await open_all(stack, session, load_or_exit(settings))
        await durable_enough_or_exit(client, opened, settings)
        # Each email's scripts and reads on FastRedis's one pipelined link (standalone Redis,
        # unless RESETGATE_FAST_REDIS=false); blocking reads and pipelines use the pool.
        pipelined: RedisClient = fast_client(client, settings.fast_redis)
        if pipelined is not client:
            stack.push_async_callback(pipelined.aclose)
        replicas = Replicas(pipelined, settings, settings.wait_replicas, settings.wait_timeout_ms)
        stack.push_async_callback(replicas.close)
        sender = build_sender(settings, pipelined, session, opened, replicas=replicas)
        await until_done(sender.refresh_control, "control state")
        await until_done(lambda: publish_quotas(client, sender), "daily quotas")
        loops = workers(sender)
        checked = [(o.config, o.provider) for o in opened]
        if settings.provider_check_interval_seconds:
            loops.append(
                preflight_loop(
                    client, session, settings, checked, settings.provider_check_interval_seconds
                )
            )
        loops.append(failover_loop(settings, client, session, checked))
        yield service.Wiring(loops, readiness(sender, client))


def failover_loop(
    settings: SenderSettings,
    client: RedisClient,
    session: aiohttp.ClientSession,
    providers: Sequence[tuple[ProviderConfig, Provider]],
) -> service.Worker:
    """Drive a progressive switch while holding its lease; with RESETGATE_FAILOVER_<NAME>
    set, start one by the policy (services/sender/failover.py)."""
    names = [config.name for config, _ in providers]
    by_name = {config.name: (config, provider) for config, provider in providers}

    async def run(name: str) -> list[Check]:
        return await preflight_run(*by_name[name], session, settings)

    checker = failover.Checker(client, run)
    driver = Driver(client, names, settings.partitions, settings.consumer_name)
    targets = failover.standbys(names)  # checked at start (``checked``)
    policy = (
        failover.Policy(
            client,
            names,
            settings.partitions,
            targets,
            failover.after_ms(settings, settings.failover_after_seconds),
            Limits.of(settings),
            checker,
            settings.consumer_name,
        )
        if targets
        else None
    )
    return failover.worker(driver, policy, checker)


async def publish_quotas(client: RedisClient, sender: Sender) -> None:
    """The quota each provider is kept to, for admission's public budget."""
    for name, runner in sender.runners.items():
        await publish(client, name, runner.health.quota)


async def open_all(
    stack: contextlib.AsyncExitStack,
    session: aiohttp.ClientSession,
    providers: Sequence[ProviderConfig],
) -> list[Opened]:
    """Open every configured provider's adapter; ``stack`` closes them."""
    opened = []
    for configured in providers:
        provider = await stack.enter_async_context(open_provider(configured, session))
        daily = await provider.daily_quota() if isinstance(provider, HasDailyQuota) else None
        opened.append(Opened(configured, provider, await provider.max_send_rate(), daily))
    return opened


async def durable_enough_or_exit(
    client: RedisClient, opened: Sequence[Opened], settings: SenderSettings
) -> None:
    """Stop with one line when Redis may lose the attempt a keyless provider relies on."""
    keyless = {
        o.config.name: o.config.kind for o in opened if not o.provider.capabilities.native_key
    }
    try:
        await check_keyless_durability(client, keyless, settings.keyless_require_fsync_always)
        await check_keyless_replication(
            client,
            keyless,
            settings.wait_replicas,
            sentinel=bool(settings.redis_sentinels),
            require=settings.keyless_require_replica_wait,
        )
    except StoreNotDurable as error:
        print(f"invalid configuration: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def checked(settings: SenderSettings) -> None:
    """A bad provider setting or template stops the process before anything starts."""
    configured = load_or_exit(settings)
    hosted_or_exit(configured)
    check.load_or_exit(settings)
    try:
        failover.standbys([c.name for c in configured])
    except ProviderConfigError as error:
        print(f"invalid configuration: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def hosted_or_exit(providers: Sequence[ProviderConfig]) -> None:
    """Stop with one line when a provider-hosted template setting cannot work."""
    several = bool(provider_names())
    for config in providers:
        name = variable(config.name, "TEMPLATE") if several else f"{ENV_PREFIX}PROVIDER_TEMPLATE"
        problem = hosted_problem(config.kind, config.template, name) if config.template else ""
        if problem:
            print(f"invalid configuration: {problem}", file=sys.stderr)
            raise SystemExit(2)


def main() -> None:
    service.main(SERVICE, SenderSettings, wire, check=checked)


if __name__ == "__main__":
    main()

"""Every preflight check of one configured provider, with its adapter open."""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Mapping
from typing import cast

import aiohttp

from shared.from_address import FromAddress, FromError, configured, parse
from shared.preflight import Check, Status, Target
from shared.preflight.ses import CONFIGURATION_SET_VARIABLE
from shared.providers.base import Provider
from shared.providers.kind import ProviderConfig
from shared.providers.registry import entry
from shared.settings import EmailSettings

Preflight = Callable[[Target], Awaitable[list[Check]]]


def from_checks(name: str, email: EmailSettings) -> tuple[list[Check], list[FromAddress]]:
    """A check per From that cannot be read (naming its setting), and those that can."""
    found, parsed = [], []
    for where, text in configured(email):
        try:
            parsed.append(parse(text))
        except FromError as error:
            found.append(Check(name, "from", Status.FAILED, f"{where}: the From {error}"))
    if not found:
        found.append(Check(name, "from", Status.OK, f"{len(parsed)} From(s) parse"))
    return found, parsed


def events_check(config: ProviderConfig, events: Mapping[str, str]) -> Check | None:
    """Whether the provider's events reach the poller: ``events`` maps each kind whose
    source is configured to its variable (its registry entry's ``event_credential``)."""
    if config.kind == "http":
        return None  # the poller reads the sandbox contract's feed
    if config.kind in events:
        return Check(config.name, "events", Status.OK, f"{events[config.kind]} is set")
    variable = CONFIGURATION_SET_VARIABLE if config.kind == "ses" else ""
    what = (
        "RESETGATE_SES_QUEUE_URL (the SQS queue of the configuration set's SNS topic)"
        if variable
        else "the webhook's signing key or credentials (docs/providers.md)"
    )
    return Check(
        config.name,
        "events",
        Status.FAILED,
        f"no {config.kind} events reach the poller: set {what}",
    )


async def run(
    config: ProviderConfig,
    provider: Provider,
    session: aiohttp.ClientSession,
    email: EmailSettings,
    events: Mapping[str, str] | None = None,
) -> list[Check]:
    """Every check of one provider; ``events`` None: the events check is left out (the
    sender does not read the poller's settings)."""
    found, froms = from_checks(config.name, email)
    found += await checks_of(config.kind)(Target(config, provider, config.http(session), froms))
    source = events_check(config, events) if events is not None else None
    return found + ([source] if source else [])


def checks_of(kind: str) -> Preflight:
    """The checks kind ``kind``'s registry entry names (``Kind.preflight``)."""
    module, function = entry(kind).preflight.split(":")
    return cast(Preflight, getattr(importlib.import_module(module), function))

"""Every provider kind, found from the modules of this package: each kind's module
(``shared/providers/<kind>.py``) ends with its ``KIND`` (``shared.providers.kind.Kind``), and
nothing else lists the kinds (docs/adding-a-provider.md).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import ModuleType

import aiohttp

from shared import providers
from shared.providers.base import Provider
from shared.providers.kind import Kind, ProviderConfig


def found_in(package: ModuleType) -> dict[str, Kind]:
    """Each ``KIND`` of the modules of ``package``, by name."""
    found: dict[str, Kind] = {}
    for module in pkgutil.iter_modules(package.__path__):
        loaded = importlib.import_module(f"{package.__name__}.{module.name}")
        declared = getattr(loaded, "KIND", None)
        if isinstance(declared, Kind):
            found[declared.name] = declared
    return found


KINDS: dict[str, Kind] = found_in(providers)
# The variable that turns each kind's pushed events on (a field of its inbound_settings; the
# preflight asks whether it is set).
EVENT_CREDENTIAL = {k.name: k.event_credential for k in KINDS.values() if k.event_credential}


# The APIs the sandbox speaks: the http contract (its own routes, services/sandbox/provider.py)
# and each kind whose entry names a dialect (services/sandbox/dialects/).
SANDBOX_MODES = ("http", *(k.name for k in KINDS.values() if k.sandbox_dialect))


def entry(name: str) -> Kind:
    """The kind of this name (the settings allow no other; an unknown one is the contract's)."""
    return KINDS.get(name) or KINDS["http"]


def keyless(name: str) -> bool:
    """True when kind ``name``'s provider has no idempotency key (:attr:`Kind.keyless`)."""
    return entry(name).keyless


def build(config: ProviderConfig, session: aiohttp.ClientSession) -> Provider:
    return entry(config.kind).adapter(config, session)


@asynccontextmanager
async def open_provider(
    config: ProviderConfig, session: aiohttp.ClientSession
) -> AsyncIterator[Provider]:
    provider = build(config, session)
    try:
        yield provider
    finally:
        close = getattr(provider, "aclose", None)
        if close is not None:
            await close()

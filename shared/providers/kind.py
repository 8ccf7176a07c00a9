"""What a provider kind is (:class:`Kind`, one per adapter module) and what one configured
provider is (:class:`ProviderConfig`, one per name in ``RESETGATE_PROVIDERS``).

``ProviderConfig`` is everything an adapter needs: one provider account (the single
provider's ``RESETGATE_PROVIDER_*`` or a configured name's ``RESETGATE_PROVIDER_<NAME>_*``,
``shared.providers.named``) with the process-wide timeouts. Every kind's module ends with its
``KIND``; ``shared.providers.registry`` finds them (docs/adding-a-provider.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import aiohttp
from pydantic import SecretStr

from shared.providers.base import Capabilities, EventModel, Http, Provider
from shared.settings import KindSettings, ProviderAccount, ProviderSettings, kind_settings_as

K = TypeVar("K", bound=KindSettings)


@dataclass(frozen=True, slots=True)
class ProviderConfig:
    name: str
    kind: str  # a registry name (shared.providers.registry.KINDS)
    url: str
    api_key: str
    connect_timeout: float
    total_timeout: float
    key_retention_seconds: float  # the http adapter's Idempotency-Key retention
    settle_seconds: float  # how old a send must be before a lookup's "not found" counts
    template: str = ""  # a provider-hosted template ("": send the local files' rendering)
    template_locales: str = ""  # comma-separated locales the hosted template exists in
    max_rate: float | None = None  # this name's sends/s ceiling; None: the process-wide one
    # What only its kind reads (the kind's own class, Kind.settings): read it with own().
    kind_settings: KindSettings = field(default_factory=KindSettings)

    @classmethod
    def of(
        cls,
        name: str,
        account: ProviderAccount,
        settings: ProviderSettings,
        max_rate: float | None = None,
    ) -> ProviderConfig:
        """Provider ``name``'s ``account`` with the process-wide ``settings``."""
        return cls(
            name=name,
            kind=account.provider_kind,
            url=account.provider_url,
            api_key=account.provider_api_key.get_secret_value(),
            connect_timeout=settings.connect_timeout_seconds,
            total_timeout=settings.total_timeout_seconds,
            key_retention_seconds=settings.idempotency_window_seconds,
            settle_seconds=settings.reconcile_grace_seconds,
            template=account.provider_template,
            template_locales=account.provider_template_locales,
            max_rate=max_rate,
            kind_settings=account.kind_settings,
        )

    def own(self, cls: type[K]) -> K:
        """This provider's kind settings as its kind's class ``cls`` (the adapter's view)."""
        return kind_settings_as(self.kind_settings, cls)

    @property
    def timeouts(self) -> dict[str, float]:
        """The adapters' keyword arguments for the process-wide timeouts."""
        return {"connect_timeout": self.connect_timeout, "total_timeout": self.total_timeout}

    def http(self, session: aiohttp.ClientSession) -> Http:
        """This provider's HTTP side: the session with its timeouts, named for its metrics."""
        return Http(session, self.name, self.connect_timeout, self.total_timeout)


# A configuration of no account in particular: what a kind declares whatever it is given
# (its keyless flag, its message size limit).
ANY = ProviderConfig("any", "http", "", "", 1.0, 1.0, key_retention_seconds=1.0, settle_seconds=0.0)


Lacks = Callable[[ProviderAccount], str]


def needs(*fields: str) -> Lacks:
    """An account check: the first of ``fields`` (``ProviderAccount`` fields or its kind's,
    ``Kind.settings``) that is empty, as one line naming its variable ("" when none is)."""

    def lacks(account: ProviderAccount) -> str:
        for name in fields:
            own = name in type(account).model_fields
            value = getattr(account if own else account.kind_settings, name)
            if not (value.get_secret_value() if isinstance(value, SecretStr) else value):
                return f"{account.variable(name)}: required for kind {account.provider_kind}"
        return ""

    return lacks


@dataclass(frozen=True, slots=True)
class Kind:
    """One provider kind, every part of it, as Dramatiq has one Broker class per backend.

    ``adapter`` builds the adapter of one configured provider and ``capabilities`` says what
    it can do. ``settings``: the class (``shared.settings.KindSettings``, declared in the
    kind's module) of the account settings only this kind reads; the account reads it with
    its own variables and ``ProviderConfig.own`` gives it to the adapter.
    ``inbound_settings``: the class (a ``KindSettings`` too, declared in the kind's module)
    of what the poller reads its pushed events with (a webhook's credential, a queue), read
    the same way, per kind and per configured name (``services/poller/inbound/sources.py``).
    ``event_credential``: the variable (after ``RESETGATE_``), one of those fields, that turns
    its pushed events on, "" when the poller reads them by polling. ``service_settings``: the
    fields of the services' own settings classes that only this kind reads (``http``'s key
    retention, the process-wide ``ProviderConfig.key_retention_seconds``).
    ``sandbox_dialect`` and ``inbound_decoder`` name the modules of the sandbox and the
    poller that speak it ("": none; a service's code stays in its service, which loads them
    through this entry).
    ``vendor``: whose documentation its limits come from ("" for resetgate's own contract).
    ``hosts_templates``: the provider keeps templates a send can name (docs/templates.md).
    ``lacks``: what an account of this kind is missing (``ProviderAccount`` refuses to load
    without it); most kinds need a key and a URL. ``preflight``: the module and function
    (``module:function``) of ``resetgate providers check``'s checks of its account.
    """

    name: str
    adapter: Callable[[ProviderConfig, aiohttp.ClientSession], Provider]
    capabilities: Callable[[ProviderConfig], Capabilities]
    settings: type[KindSettings] = KindSettings
    inbound_settings: type[KindSettings] = KindSettings
    service_settings: tuple[str, ...] = ()
    event_credential: str = ""
    sandbox_dialect: str = ""
    inbound_decoder: str = ""
    vendor: str = ""
    hosts_templates: bool = False
    lacks: Lacks = field(default=needs("provider_api_key", "provider_url"))
    preflight: str = "shared.preflight.keyed:contract"

    @property
    def keyless(self) -> bool:
        """True when this kind's provider has no idempotency key, so a store that forgets an
        attempt makes a second email (the sender then needs appendfsync always)."""
        return not self.capabilities(ANY).native_key

    @property
    def events(self) -> EventModel:
        """How its delivery events reach the poller (polled, pushed, queued)."""
        return self.capabilities(ANY).events

    @property
    def max_message_bytes(self) -> int:
        return self.capabilities(ANY).max_message_bytes

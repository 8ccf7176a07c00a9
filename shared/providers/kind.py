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

import aiohttp
from pydantic import SecretStr

from shared.providers.base import Capabilities, EventModel, Http, Provider
from shared.settings import ProviderAccount, ProviderSettings


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
    mailgun_domain: str = ""
    mailgun_events_delay_seconds: float = 1800.0
    ses_configuration_set: str = ""
    ses_region: str = ""  # AWS_REGION or AWS_DEFAULT_REGION (ProviderAccount.ses_region)
    template: str = ""  # a provider-hosted template ("": send the local files' rendering)
    template_locales: str = ""  # comma-separated locales the hosted template exists in
    max_rate: float | None = None  # this name's sends/s ceiling; None: the process-wide one

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
            mailgun_domain=account.mailgun_domain,
            mailgun_events_delay_seconds=account.mailgun_events_delay_seconds,
            ses_configuration_set=settings.ses_configuration_set,
            ses_region=settings.ses_region,
            template=account.provider_template,
            template_locales=account.provider_template_locales,
            max_rate=max_rate,
        )

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
    """An account check: the first of ``fields`` (``ProviderAccount`` fields) that is empty,
    as one line naming its variable ("" when none is)."""

    def lacks(account: ProviderAccount) -> str:
        for name in fields:
            value = getattr(account, name)
            if not (value.get_secret_value() if isinstance(value, SecretStr) else value):
                return f"{account.variable(name)}: required for kind {account.provider_kind}"
        return ""

    return lacks


@dataclass(frozen=True, slots=True)
class Kind:
    """One provider kind, every part of it, as Dramatiq has one Broker class per backend.

    ``adapter`` builds the adapter of one configured provider and ``capabilities`` says what
    it can do. ``settings``: the settings fields only this kind reads
    (``shared.settings.ProviderSettings``, the poller's ``InboundSettings`` and
    ``PollerSettings``).
    ``event_credential``: the variable (after ``RESETGATE_``) that turns its pushed events
    on, "" when the poller reads them by polling. ``sandbox_dialect`` and
    ``inbound_decoder`` name the modules of the sandbox and the poller that speak it ("":
    none; a service's code stays in its service, which loads them through this entry).
    ``vendor``: whose documentation its limits come from ("" for resetgate's own contract).
    ``hosts_templates``: the provider keeps templates a send can name (docs/templates.md).
    ``lacks``: what an account of this kind is missing (``ProviderAccount`` refuses to load
    without it); most kinds need a key and a URL. ``preflight``: the module and function
    (``module:function``) of ``resetgate providers check``'s checks of its account.
    """

    name: str
    adapter: Callable[[ProviderConfig, aiohttp.ClientSession], Provider]
    capabilities: Callable[[ProviderConfig], Capabilities]
    settings: tuple[str, ...] = ()
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

"""Where pushed events come from, and which configured providers each source speaks for.

Per configured name (``RESETGATE_PROVIDERS``): a provider of a webhook kind with its own
credential (``RESETGATE_PROVIDER_<NAME>_SENDGRID_WEBHOOK_PUBLIC_KEY`` ...) has its own path
``/webhooks/<name>``; one of kind ``ses`` with ``RESETGATE_PROVIDER_<NAME>_SES_QUEUE_URL``
its own queue. Its events are joined only to operations that provider holds: two SendGrid
accounts (a studio's primary and standby) each sign with their own key and each event lands
on the provider that sent the message.

Per kind: ``RESETGATE_SENDGRID_WEBHOOK_PUBLIC_KEY`` ... serve ``/webhooks/<kind>``
(and ``RESETGATE_SES_QUEUE_URL`` its queue) for the providers of that kind without a
credential of their own (all of that kind when each has one; any provider when none is of
that kind, or when only one provider is configured).

Each source is read with its kind's ``inbound_settings`` (declared in the kind's module,
``shared/providers/<kind>.py``), the same fields under either prefix; a name leaves unset
what its class inherits (SES's long poll, region and endpoint) to the per-kind values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import SecretStr

from services.poller.settings import PUSHED, PollerSettings
from shared.providers.base import EventModel
from shared.providers.kind import ProviderConfig
from shared.providers.named import ProviderConfigError, variable
from shared.providers.registry import entry
from shared.settings import (
    ENV_PREFIX,
    K,
    KindSettings,
    inheriting,
    kind_settings_as,
    provider_prefix,
    read_kind,
)


@dataclass(frozen=True, slots=True)
class Source:
    route: str  # /webhooks/<route>; the metrics' provider label
    kind: str  # sendgrid | mailgun | postmark | ses
    # The configured providers whose events it carries; None: any (no provider of its kind)
    providers: frozenset[str] | None
    # What it is read with: its kind's inbound_settings (a credential, a queue), its own
    inbound: KindSettings

    def own(self, cls: type[K]) -> K:
        """Its settings as its kind's class ``cls`` (its decoder's view)."""
        return kind_settings_as(self.inbound, cls)


def sources(settings: PollerSettings, configured: Sequence[ProviderConfig] = ()) -> list[Source]:
    """Every source the configuration turns on; raises ProviderConfigError naming a clash."""
    found = [s for p in configured if (s := _named(settings, p)) is not None]
    own = {s.route for s in found}
    for kind in PUSHED:
        inbound = settings.inbound(kind)
        if not switched_on(kind, inbound):
            continue
        if kind in own:
            raise ProviderConfigError(
                f"{ENV_PREFIX}{entry(kind).event_credential} and provider {kind!r}'s own "
                f"credential both claim /webhooks/{kind}: keep one of them"
            )
        found.append(Source(kind, kind, _kind_providers(kind, configured, own), inbound))
    return found


def switched_on(kind: str, inbound: KindSettings) -> bool:
    """True when ``inbound`` sets the credential that turns kind ``kind``'s events on."""
    value = getattr(inbound, entry(kind).event_credential.lower())
    return bool(value.get_secret_value() if isinstance(value, SecretStr) else value)


def _named(settings: PollerSettings, provider: ProviderConfig) -> Source | None:
    name, kind = provider.name, provider.kind
    try:
        read = {k: read_kind(cls, provider_prefix(name)) for k, cls in PUSHED.items()}
    except ValueError as error:
        raise ProviderConfigError(str(error)) from None
    other = sorted(k for k, inbound in read.items() if k != kind and switched_on(k, inbound))
    if other:
        raise ProviderConfigError(
            f"{variable(name, entry(other[0]).event_credential)}: provider {name} is of kind {kind}"
        )
    if kind not in read or not switched_on(kind, read[kind]):
        return None
    return Source(name, kind, frozenset({name}), inheriting(read[kind], settings.inbound(kind)))


def _kind_providers(
    kind: str, configured: Sequence[ProviderConfig], own: set[str]
) -> frozenset[str] | None:
    of_kind = {p.name for p in configured if p.kind == kind}
    if not of_kind or len(configured) == 1:
        # One provider in all: nobody's events to confuse with it, and an operation whose
        # attempt names another provider (RESETGATE_PROVIDER_NAME changed since) still gets
        # its events.
        return None
    return frozenset(of_kind - own or of_kind)


def webhook_sources(found: Sequence[Source]) -> list[Source]:
    return [s for s in found if entry(s.kind).events is EventModel.WEBHOOK]


def queue_sources(found: Sequence[Source]) -> list[Source]:
    return [s for s in found if entry(s.kind).events is EventModel.QUEUE]

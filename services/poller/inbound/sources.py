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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from services.poller.settings import CREDENTIAL, InboundSettings, PollerSettings, for_provider
from shared.providers.base import EventModel
from shared.providers.kind import ProviderConfig
from shared.providers.named import ProviderConfigError, variable
from shared.providers.registry import entry
from shared.settings import ENV_PREFIX


@dataclass(frozen=True, slots=True)
class Source:
    route: str  # /webhooks/<route>; the metrics' provider label
    kind: str  # sendgrid | mailgun | postmark | ses
    # The configured providers whose events it carries; None: any (no provider of its kind)
    providers: frozenset[str] | None
    settings: PollerSettings  # the poller's, with this source's credentials


def sources(settings: PollerSettings, configured: Sequence[ProviderConfig] = ()) -> list[Source]:
    """Every source the configuration turns on; raises ProviderConfigError naming a clash."""
    found = [s for p in configured if (s := _named(settings, p)) is not None]
    own = {s.route for s in found}
    for kind in settings.credentials():
        if kind in own:
            raise ProviderConfigError(
                f"{ENV_PREFIX}{CREDENTIAL[kind]} and provider {kind!r}'s own credential both "
                f"claim /webhooks/{kind}: keep one of them"
            )
        found.append(Source(kind, kind, _kind_providers(kind, configured, own), settings))
    return found


def _named(settings: PollerSettings, provider: ProviderConfig) -> Source | None:
    name, kind = provider.name, provider.kind
    try:
        inbound = for_provider(name)
    except ValueError as error:
        raise ProviderConfigError(str(error)) from None
    credentials = inbound.credentials()
    other = sorted(set(credentials) - {kind})
    if other:
        raise ProviderConfigError(
            f"{variable(name, CREDENTIAL[other[0]])}: provider {name} is of kind {kind}"
        )
    if kind not in credentials:
        return None
    return Source(name, kind, frozenset({name}), _with(settings, inbound))


def _with(settings: PollerSettings, inbound: InboundSettings) -> PollerSettings:
    return settings.model_copy(update=inbound.fields())


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

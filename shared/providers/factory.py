"""Build an adapter from one provider configuration.

``ProviderConfig`` is everything an adapter needs: one provider account (the single
provider's ``RESETGATE_PROVIDER_*`` or a configured name's ``RESETGATE_PROVIDER_<NAME>_*``,
``shared.providers.named``) with the process-wide timeouts; :func:`open_provider` is called
once for each.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import aiohttp

from shared.providers import http, mailgun, postmark, sendgrid, ses
from shared.providers.base import Provider
from shared.providers.http import HttpProvider
from shared.providers.mailgun import MailgunProvider
from shared.providers.postmark import PostmarkProvider
from shared.providers.sendgrid import SendGridProvider
from shared.providers.ses import SesProvider
from shared.settings import SANDBOX_URL, ProviderAccount, ProviderKind, ProviderSettings


@dataclass(frozen=True, slots=True)
class ProviderConfig:
    name: str
    kind: ProviderKind
    url: str
    api_key: str
    connect_timeout: float
    total_timeout: float
    key_retention_seconds: float  # the http adapter's Idempotency-Key retention
    settle_seconds: float  # how old a send must be before a lookup's "not found" counts
    mailgun_domain: str = ""
    mailgun_events_delay_seconds: float = 1800.0
    ses_configuration_set: str = ""
    template: str = ""  # a provider-hosted template ("": send the local files' rendering)
    template_locales: str = ""  # comma-separated locales the hosted template exists in

    @classmethod
    def of(cls, name: str, account: ProviderAccount, settings: ProviderSettings) -> ProviderConfig:
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
            template=account.provider_template,
            template_locales=account.provider_template_locales,
        )


def build(config: ProviderConfig, session: aiohttp.ClientSession) -> Provider:
    timeouts = {"connect_timeout": config.connect_timeout, "total_timeout": config.total_timeout}
    if config.kind == "sendgrid":
        return SendGridProvider(session, config.url, config.api_key, name=config.name,
                                **timeouts)  # fmt: skip
    if config.kind == "postmark":
        return PostmarkProvider(session, config.url, config.api_key, name=config.name,
                                settle_seconds=config.settle_seconds, **timeouts)  # fmt: skip
    if config.kind == "mailgun":
        settle = max(config.settle_seconds, config.mailgun_events_delay_seconds)
        return MailgunProvider(session, config.url, config.api_key, config.mailgun_domain,
                               name=config.name, settle_seconds=settle, **timeouts)  # fmt: skip
    if config.kind == "ses":
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or ""
        return SesProvider(region, _ses_endpoint(config.url), name=config.name,
                           configuration_set=config.ses_configuration_set, **timeouts)  # fmt: skip
    return HttpProvider(session, config.url, config.api_key, name=config.name,
                        key_retention_seconds=config.key_retention_seconds, **timeouts)  # fmt: skip


def keyless(kind: str) -> bool:
    """True when this kind's provider has no idempotency key, so a store that forgets an
    attempt makes a second email (the sender then needs appendfsync always)."""
    capabilities = {
        "sendgrid": sendgrid.CAPABILITIES,
        "postmark": postmark.capabilities(0.0),
        "mailgun": mailgun.capabilities(0.0),
        "ses": ses.CAPABILITIES,
    }.get(kind, http.capabilities(1.0))
    return not capabilities.native_key


def _ses_endpoint(url: str) -> str:
    # The http default points at the local sandbox, which SES never is.
    return "" if url.rstrip("/") == SANDBOX_URL else url


@asynccontextmanager
async def open_provider(
    config: ProviderConfig, session: aiohttp.ClientSession
) -> AsyncIterator[Provider]:
    provider = build(config, session)
    try:
        yield provider
    finally:
        if isinstance(provider, SesProvider):
            await provider.aclose()

"""Several providers configured at once: ``RESETGATE_PROVIDERS=primary,standby``.

Each name has its own account, ``shared.settings.ProviderAccount`` read under the name's
prefix: ``RESETGATE_PROVIDER_<NAME>_KIND``, ``_URL``, ``_API_KEY``, ``_MAX_RATE``,
``_TEMPLATE`` and ``_TEMPLATE_LOCALES`` (a provider-hosted template, docs/templates.md) and
kind-specific settings with the same infix (``_MAILGUN_DOMAIN``,
``_MAILGUN_EVENTS_DELAY_SECONDS``). The first name listed serves every partition until a
switch says otherwise. Without ``RESETGATE_PROVIDERS`` the single-provider settings
(``RESETGATE_PROVIDER_KIND`` ...) define one provider, named by ``RESETGATE_PROVIDER_NAME``.
Timeouts and the lookup settle time stay process-wide.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import replace

from shared.providers.kind import ProviderConfig
from shared.settings import (
    PROVIDER_NAME,
    PROVIDERS_VARIABLE,
    ProviderAccount,
    ProviderSettings,
    inheriting,
    provider_prefix,
    providers_listed,
    read_kind,
)

LIST_VARIABLE = PROVIDERS_VARIABLE
NAME = re.compile(PROVIDER_NAME)
# A name's setting it leaves unset is the process-wide one: RESETGATE_PROVIDER_MAX_RATE, and
# the fields its kind's settings class says (KindSettings.INHERITED:
# RESETGATE_MAILGUN_EVENTS_DELAY_SECONDS, RESETGATE_SES_CONFIGURATION_SET).
INHERITED = ("provider_max_rate",)


class ProviderConfigError(ValueError):
    """One line naming the variable that is wrong and what to do about it."""


def variable(name: str, suffix: str) -> str:
    return f"{provider_prefix(name)}{suffix}"


def provider_names(environ: Mapping[str, str] | None = None, fallback: str = "") -> list[str]:
    """The configured names in order (the first serves every partition by default)."""
    raw = providers_listed(environ)
    if not raw:
        return [fallback] if fallback else []
    names = [n.strip() for n in raw.split(",")]
    for name in names:
        if not NAME.match(name):
            raise ProviderConfigError(
                f"{LIST_VARIABLE}: {name!r} is not a provider name (a-z and 0-9, 1-32 characters)"
            )
    if len(set(names)) != len(names):
        raise ProviderConfigError(f"{LIST_VARIABLE}: a name is listed twice")
    return names


def provider_kinds(fallback: str) -> dict[str, str]:
    """Each configured name and its kind, for on-call's views: a name whose account does not
    load says so instead of a kind (the services refuse to start on it)."""
    names = provider_names(fallback=fallback)
    if not providers_listed():
        return dict.fromkeys(names, ProviderAccount.declared_kind())
    kinds = {}
    for name in names:
        try:
            kinds[name] = str(ProviderAccount.of(name).provider_kind)
        except ValueError:
            kinds[name] = "misconfigured"
    return kinds


def load_providers(settings: ProviderSettings) -> list[ProviderConfig]:
    """Every configured provider, the default one first: each listed name's account, or the
    single provider's (``settings``, checked when it was loaded)."""
    names = provider_names()
    if not names:
        return [ProviderConfig.of(settings.provider_name, settings, settings)]
    return [_named(name, settings) for name in names]


def load_or_exit(settings: ProviderSettings) -> list[ProviderConfig]:
    """The configured providers, or stop the process with one line naming the variable."""
    try:
        return load_providers(settings)
    except ProviderConfigError as error:
        print(f"invalid configuration: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def _named(name: str, settings: ProviderSettings) -> ProviderConfig:
    try:
        account = ProviderAccount.of(name)
    except ValueError as error:
        raise ProviderConfigError(str(error)) from None
    given = account.model_fields_set
    account = account.model_copy(
        update={field: getattr(settings, field) for field in INHERITED if field not in given}
    )
    rate = account.provider_max_rate if "provider_max_rate" in given else None
    config = ProviderConfig.of(name, account, settings, rate)
    own = config.kind_settings
    if all(field in own.model_fields_set for field in own.INHERITED):
        return config
    try:
        process_wide = read_kind(type(own))
    except ValueError as error:
        raise ProviderConfigError(str(error)) from None
    return replace(config, kind_settings=inheriting(own, process_wide))

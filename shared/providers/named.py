"""Several providers configured at once: ``RESETGATE_PROVIDERS=primary,standby``.

Each name has its own ``RESETGATE_PROVIDER_<NAME>_KIND``, ``_URL``, ``_API_KEY``,
``_MAX_RATE``, ``_TEMPLATE`` and ``_TEMPLATE_LOCALES`` (a provider-hosted template,
docs/templates.md) and kind-specific settings with the same infix (``_MAILGUN_DOMAIN``,
``_MAILGUN_EVENTS_DELAY_SECONDS``). The first name listed serves every partition until a
switch says otherwise. Without ``RESETGATE_PROVIDERS`` the single-provider settings
(``RESETGATE_PROVIDER_KIND`` ...) define one provider, named by ``RESETGATE_PROVIDER_NAME``.
Timeouts and the lookup settle time stay process-wide.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import get_args

from shared.providers.factory import ProviderConfig
from shared.settings import ENV_PREFIX, KEY_KINDS, SANDBOX_URL, ProviderKind, ProviderSettings

LIST_VARIABLE = f"{ENV_PREFIX}PROVIDERS"
NAME = re.compile(r"^[a-z0-9]{1,32}$")
KINDS: tuple[str, ...] = get_args(ProviderKind)


class ProviderConfigError(ValueError):
    """One line naming the variable that is wrong and what to do about it."""


@dataclass(frozen=True, slots=True)
class NamedProvider:
    config: ProviderConfig
    max_rate: float | None  # sends/s ceiling; None: the process-wide RESETGATE_PROVIDER_MAX_RATE


def variable(name: str, suffix: str) -> str:
    return f"{ENV_PREFIX}PROVIDER_{name.upper()}_{suffix}"


def provider_names(environ: Mapping[str, str] | None = None, fallback: str = "") -> list[str]:
    """The configured names in order (the first serves every partition by default)."""
    env = os.environ if environ is None else environ
    raw = env.get(LIST_VARIABLE, "").strip()
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


def load_providers(
    settings: ProviderSettings, environ: Mapping[str, str] | None = None
) -> list[NamedProvider]:
    """Every configured provider, the default one first."""
    env = os.environ if environ is None else environ
    names = provider_names(env)
    if not names:
        return [NamedProvider(ProviderConfig.from_settings(settings), None)]
    base = ProviderConfig.from_settings(settings)
    return [_named(name, base, env) for name in names]


def load_or_exit(settings: ProviderSettings) -> list[NamedProvider]:
    """The configured providers, or stop the process with one line naming the variable."""
    try:
        return load_providers(settings)
    except ProviderConfigError as error:
        print(f"invalid configuration: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def _named(name: str, base: ProviderConfig, env: Mapping[str, str]) -> NamedProvider:
    kind = env.get(variable(name, "KIND"), "")
    if kind not in KINDS:
        raise ProviderConfigError(f"{variable(name, 'KIND')}: must be one of {', '.join(KINDS)}")
    api_key = env.get(variable(name, "API_KEY"), "")
    if kind in KEY_KINDS and not api_key:
        raise ProviderConfigError(f"{variable(name, 'API_KEY')}: required for kind {kind}")
    domain = env.get(variable(name, "MAILGUN_DOMAIN"), "")
    if kind == "mailgun" and not re.match(r"^[A-Za-z0-9.-]{1,253}$", domain):
        raise ProviderConfigError(f"{variable(name, 'MAILGUN_DOMAIN')}: required for mailgun")
    if kind == "ses" and not (env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")):
        raise ProviderConfigError(f"AWS_REGION: required for {variable(name, 'KIND')}=ses")
    url = env.get(variable(name, "URL"), "") or (SANDBOX_URL if kind == "http" else "")
    if not url and kind != "ses":  # SES alone has a default endpoint (the region's)
        raise ProviderConfigError(f"{variable(name, 'URL')}: required for kind {kind}")
    config = replace(
        base,
        name=name,
        kind=kind,  # type: ignore[arg-type]  # checked against KINDS above
        url=url,
        api_key=api_key,
        mailgun_domain=domain,
        template=env.get(variable(name, "TEMPLATE"), ""),
        template_locales=env.get(variable(name, "TEMPLATE_LOCALES"), ""),
        mailgun_events_delay_seconds=_number(
            env, name, "MAILGUN_EVENTS_DELAY_SECONDS", base.mailgun_events_delay_seconds, 0
        ),
    )
    rate = _number(env, name, "MAX_RATE", 0.0, 0)
    if variable(name, "MAX_RATE") in env and rate <= 0:
        raise ProviderConfigError(f"{variable(name, 'MAX_RATE')}: must be a number > 0")
    return NamedProvider(config, rate or None)


def _number(env: Mapping[str, str], name: str, suffix: str, default: float, low: float) -> float:
    raw = env.get(variable(name, suffix), "")
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value >= low:  # also false for nan
        raise ProviderConfigError(f"{variable(name, suffix)}: must be a number >= {low:g}")
    return value

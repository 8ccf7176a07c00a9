"""``resetgate providers check``: what a first send through each configured provider would
hit, asked through the providers' documented read-only endpoints (never a send).

Reads the settings the sender and the poller read (the provider accounts, the From and the
brands, the webhook keys and the SES queue), so run it where they run. Needs no Redis.
Exit 0 when no check fails ("unknown" is not a failure), 1 when one does.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Mapping, Sequence

import aiohttp

from shared.preflight import Check, failing
from shared.preflight.run import run
from shared.providers.kind import ProviderConfig
from shared.providers.named import load_or_exit, provider_names
from shared.providers.registry import EVENT_CREDENTIAL, open_provider
from shared.settings import (
    ENV_PREFIX,
    EmailSettings,
    ProviderSettings,
    load,
    provider_prefix,
)


class PreflightSettings(ProviderSettings, EmailSettings):
    """The provider accounts and the email's From, as the sender reads them."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    providers = subparsers.add_parser("providers", help="check each provider before a first send")
    sub = providers.add_subparsers(dest="providers_command", required=True)
    check = sub.add_parser("check", help="ask each provider what a first send would hit")
    check.add_argument("--provider", default="", help="only this configured name")
    check.set_defaults(handler=check_command)


def check_command(args: argparse.Namespace) -> int:
    settings = load(PreflightSettings)
    configured = load_or_exit(settings)
    if args.provider:
        configured = [p for p in configured if p.name == args.provider]
        if not configured:
            print(f"no configured provider {args.provider!r}", file=sys.stderr)
            return 2
    checks = asyncio.run(check_all(settings, configured))
    print(f"{'PROVIDER':<12} {'CHECK':<18} {'RESULT':<8} WHAT TO DO")
    for found in checks:
        print(found.line())
    bad = failing(checks)
    print(f"{len(bad)} check(s) failed" if bad else "no check failed")
    return 1 if bad else 0


async def check_all(
    settings: PreflightSettings, configured: Sequence[ProviderConfig]
) -> list[Check]:
    found: list[Check] = []
    several = bool(provider_names())
    timeout = aiohttp.ClientTimeout(total=settings.total_timeout_seconds * 4)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        for config in configured:
            events = _events(config.name, several)
            async with open_provider(config, session) as provider:
                found += await run(config, provider, session, settings, events)
    return found


def _events(name: str, several: bool) -> Mapping[str, str]:
    """kind -> the variable that turns its pushed events on, for each kind where it is set
    (the poller's settings; it checks their values when it starts)."""
    prefix = provider_prefix(name) if several else ENV_PREFIX
    variables = {kind: prefix + suffix for kind, suffix in EVENT_CREDENTIAL.items()}
    return {kind: v for kind, v in variables.items() if os.environ.get(v, "").strip()}

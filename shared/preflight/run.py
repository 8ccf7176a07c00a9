"""Every preflight check of one configured provider, with its adapter open."""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp

from shared.from_address import FromAddress, FromError, configured, parse
from shared.preflight import Check, Status, keyed
from shared.preflight import ses as ses_checks
from shared.providers.base import Http, Provider
from shared.providers.kind import ProviderConfig
from shared.providers.ses import SesProvider
from shared.settings import EmailSettings

KEYED = {"sendgrid": keyed.sendgrid, "postmark": keyed.postmark, "mailgun": keyed.mailgun}


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
    source is configured to its variable (services/poller/settings.py, CREDENTIAL)."""
    if config.kind == "http":
        return None  # the poller reads the sandbox contract's feed
    if config.kind in events:
        return Check(config.name, "events", Status.OK, f"{events[config.kind]} is set")
    variable = ses_checks.CONFIGURATION_SET_VARIABLE if config.kind == "ses" else ""
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
    if config.kind in KEYED:
        http = Http(session, config.name, config.connect_timeout, config.total_timeout)
        found += await KEYED[config.kind](http, config, froms)
    elif isinstance(provider, SesProvider):
        found += await ses_checks.checks(provider, config.ses_configuration_set, froms)
    else:
        found.append(await _contract_key(session, config))
    source = events_check(config, events) if events is not None else None
    return found + ([source] if source else [])


async def _contract_key(session: aiohttp.ClientSession, config: ProviderConfig) -> Check:
    """The http kind (docs/provider-contract.md): its events feed answers the key."""
    http = Http(session, config.name, config.connect_timeout, config.total_timeout)
    auth = {"Authorization": f"Bearer {config.api_key}"}
    answer = await keyed.get(http, config.url.rstrip("/") + "/email/events?limit=1", auth)
    if answer is not None and answer.status in (401, 403):
        return Check(
            config.name,
            "key",
            Status.FAILED,
            f"GET /email/events answered "
            f"{answer.status}: set the provider's API key to a valid one",
        )
    if answer is None or answer.status != 200:
        said = "no answer" if answer is None else f"HTTP {answer.status}"
        return Check(config.name, "key", Status.UNKNOWN, f"GET /email/events: {said}")
    return Check(config.name, "key", Status.OK, "the key reads the events feed")

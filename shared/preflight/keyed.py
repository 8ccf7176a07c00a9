"""Preflight checks of the key-based providers, each through the endpoint its API documents:

- SendGrid: ``GET /v3/scopes`` (twilio.com/docs/sendgrid/api-reference/api-key-permissions/
  retrieve-a-list-of-scopes-for-which-this-user-has-access: ``{"scopes": [...]}``; the key
  may send when ``mail.send`` is among them); ``GET /v3/whitelabel/domains`` (the
  authenticated domains, each with ``valid``) and ``GET /v3/verified_senders`` (Single
  Sender Verification, ``{"results": [{"from_email", "verified"}]}``); a 403 is a key
  whose scope cannot read them: unknown.
- Postmark: ``GET /server`` (postmarkapp.com/developer/api/server-api; ``DeliveryType``
  "Live" or "Sandbox", postmarkapp.com/developer/api/servers-api: a Sandbox server accepts
  and never delivers). Sender signatures answer only to an account token: unknown.
- Mailgun: ``GET /v3/domains/{name}`` (documentation.mailgun.com/docs/mailgun/api-reference/
  openapi-final/tag/Domains: ``{"domain": {"name", "state": active|unverified|disabled}}``;
  404 for a domain the account lacks, which is also what a domain on the other region's base
  URL gets: US https://api.mailgun.net, EU https://api.eu.mailgun.net).
"""

from __future__ import annotations

import base64
from typing import Any

from shared import codec
from shared.from_address import FromAddress
from shared.preflight import Check, Status, Target
from shared.providers.base import Answer, Http, ProviderUnavailable
from shared.providers.kind import ProviderConfig
from shared.providers.mailgun import MailgunSettings

MAILGUN_REGIONS = {"us": "https://api.mailgun.net", "eu": "https://api.eu.mailgun.net"}


async def get(http: Http, url: str, headers: dict[str, str]) -> Answer | None:
    """The answer, None when the provider did not answer (a timeout, a refused connection)."""
    try:
        return await http.ask("GET", url, headers=headers)
    except ProviderUnavailable:
        return None


def _silent(config: ProviderConfig, check: str, path: str, answer: Answer | None) -> Check:
    said = "no answer" if answer is None else f"HTTP {answer.status}"
    return Check(
        config.name,
        check,
        Status.UNKNOWN,
        f"{path} on {config.url}: {said}; check the URL and the network, then again",
    )


def _wrong_key(config: ProviderConfig, path: str, status: int) -> Check:
    return Check(
        config.name,
        "key",
        Status.FAILED,
        f"{path} answered {status}: the provider refused the key; set the "
        "provider's API key to a valid one",
    )


# -- SendGrid ------------------------------------------------------------------------------
async def sendgrid(target: Target) -> list[Check]:
    http, config, froms = target.http, target.config, target.froms
    base, auth = config.url.rstrip("/"), {"Authorization": f"Bearer {config.api_key}"}
    answer = await get(http, base + "/v3/scopes", auth)
    if answer is None or answer.status not in (200, 401):
        return [_silent(config, "key", "GET /v3/scopes", answer)]
    if answer.status == 401:
        return [_wrong_key(config, "GET /v3/scopes", 401)]
    scopes = answer.json().get("scopes")
    if not isinstance(scopes, list) or "mail.send" not in scopes:
        return [
            Check(
                config.name,
                "key",
                Status.FAILED,
                "the key lacks the mail.send scope: give it Mail Send access (Settings > API Keys)",
            )
        ]
    checks = [Check(config.name, "key", Status.OK, "the key has mail.send")]
    domains = await get(http, base + "/v3/whitelabel/domains", auth)
    senders = await get(http, base + "/v3/verified_senders", auth)
    return checks + [_sendgrid_from(config, f, domains, senders) for f in froms]


def _sendgrid_from(
    config: ProviderConfig, sender: FromAddress, domains: Answer | None, senders: Answer | None
) -> Check:
    if _listed(
        domains,
        lambda row: (
            str(row.get("domain", "")).lower() == sender.domain and row.get("valid") is True
        ),
    ):
        return Check(config.name, "from_domain", Status.OK, f"{sender.domain} is authenticated")
    if _listed(
        senders,
        lambda row: (
            str(row.get("from_email", "")).lower() == sender.email.lower()
            and row.get("verified") is True
        ),
    ):
        return Check(config.name, "from_domain", Status.OK, f"a verified sender on {sender.domain}")
    if any(a is None or a.status != 200 for a in (domains, senders)):
        return Check(
            config.name,
            "from_domain",
            Status.UNKNOWN,
            f"the key may not read sender authentication for {sender.domain}: check "
            "it in SendGrid (Settings > Sender Authentication)",
        )
    return Check(
        config.name,
        "from_domain",
        Status.FAILED,
        f"SendGrid has no authenticated domain {sender.domain} nor a verified sender "
        "for the From: authenticate the domain (Settings > Sender Authentication)",
    )


def _listed(answer: Answer | None, match: Any) -> bool:
    if answer is None or answer.status != 200:
        return False
    try:
        rows: Any = codec.loads(answer.body)
    except codec.JSONDecodeError:
        return False
    if isinstance(rows, dict):  # verified_senders: {"results": [...]}
        rows = rows.get("results")
    return isinstance(rows, list) and any(isinstance(r, dict) and match(r) for r in rows)


# -- Postmark ------------------------------------------------------------------------------
POSTMARK_TEST_TOKEN = "POSTMARK_API_TEST"  # noqa: S105  # Postmark's documented test token


async def postmark(target: Target) -> list[Check]:
    http, config, froms = target.http, target.config, target.froms
    auth = {"X-Postmark-Server-Token": config.api_key, "Accept": "application/json"}
    answer = await get(http, config.url.rstrip("/") + "/server", auth)
    if answer is None or answer.status not in (200, 401):
        return [_silent(config, "key", "GET /server", answer)]
    if answer.status == 401:
        return [_wrong_key(config, "GET /server", 401)]
    server = answer.json()
    checks = [Check(config.name, "key", Status.OK, f"server {server.get('Name', '?')!s}")]
    test = config.api_key == POSTMARK_TEST_TOKEN or server.get("DeliveryType") == "Sandbox"
    checks.append(
        Check(
            config.name,
            "delivery",
            Status.FAILED if test else Status.OK,
            "test mode: Postmark accepts and delivers nothing; use a Live server's token"
            if test
            else "a Live server",
        )
    )
    domains = ", ".join(sorted({f.domain for f in froms}))
    checks.append(
        Check(
            config.name,
            "from_domain",
            Status.UNKNOWN,
            f"Postmark shows sender signatures to an account token only: check "
            f"{domains} under Sender Signatures",
        )
    )
    return checks


# -- Mailgun -------------------------------------------------------------------------------
async def mailgun(target: Target) -> list[Check]:
    http, config, froms = target.http, target.config, target.froms
    token = base64.b64encode(f"api:{config.api_key}".encode()).decode()
    auth = {"Authorization": f"Basic {token}"}
    domain = config.own(MailgunSettings).mailgun_domain
    own = await _mailgun_domain(http, config, auth, domain, "domain")
    if own.check == "key":
        return [own]
    answered = own.status is not Status.UNKNOWN
    checks = [
        Check(
            config.name,
            "key",
            Status.OK if answered else Status.UNKNOWN,
            "Mailgun answered with the key" if answered else own.detail,
        ),
        own,
    ]
    for other in sorted({f.domain for f in froms} - {domain.lower()}):
        checks.append(await _mailgun_domain(http, config, auth, other, "from_domain"))
    return checks


async def _mailgun_domain(
    http: Http, config: ProviderConfig, auth: dict[str, str], domain: str, check: str
) -> Check:
    path = f"GET /v3/domains/{domain}"
    answer = await get(http, f"{config.url.rstrip('/')}/v3/domains/{domain}", auth)
    if answer is not None and answer.status in (401, 403):
        return _wrong_key(config, path, answer.status)
    if answer is not None and answer.status == 404:
        return Check(
            config.name,
            check,
            Status.FAILED,
            f"Mailgun has no domain {domain} at {config.url}: {_region_hint(config.url)}",
        )
    if answer is None or answer.status != 200:
        return _silent(config, check, path, answer)
    found = answer.json().get("domain")
    state = found.get("state") if isinstance(found, dict) else None
    if state == "active":
        return Check(config.name, check, Status.OK, f"{domain} is active")
    if state in ("unverified", "disabled"):
        return Check(
            config.name,
            check,
            Status.FAILED,
            f"{domain} is {state}: verify its DNS records in Mailgun (Domains)",
        )
    return Check(config.name, check, Status.UNKNOWN, f"{domain}: state {state!r}")


def _region_hint(url: str) -> str:
    if url.rstrip("/").endswith("/v3"):
        return "the base URL must not end in /v3 (the adapter adds it)"
    eu = "api.eu.mailgun.net" in url
    other, region = (MAILGUN_REGIONS["us"], "US") if eu else (MAILGUN_REGIONS["eu"], "EU")
    return f"add it, or, if the domain is in the {region} region, set the provider URL to {other}"


# -- the http contract ---------------------------------------------------------------------
async def contract(target: Target) -> list[Check]:
    """The http kind (docs/provider-contract.md): its events feed answers the key."""
    http, config = target.http, target.config
    auth = {"Authorization": f"Bearer {config.api_key}"}
    answer = await get(http, config.url.rstrip("/") + "/email/events?limit=1", auth)
    if answer is not None and answer.status in (401, 403):
        return [
            Check(
                config.name,
                "key",
                Status.FAILED,
                f"GET /email/events answered "
                f"{answer.status}: set the provider's API key to a valid one",
            )
        ]
    if answer is None or answer.status != 200:
        said = "no answer" if answer is None else f"HTTP {answer.status}"
        return [Check(config.name, "key", Status.UNKNOWN, f"GET /email/events: {said}")]
    return [Check(config.name, "key", Status.OK, "the key reads the events feed")]

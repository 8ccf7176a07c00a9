"""`resetgate providers check` against each sandbox and moto: read-only endpoints only, one
line per check, "unknown" where the key's scope or the provider cannot tell.

Pages (the sandbox's answers, services/sandbox/account.py): SendGrid GET /v3/scopes
(twilio.com/docs/sendgrid/api-reference/api-key-permissions/retrieve-a-list-of-scopes-for-which-this-user-has-access),
GET /v3/whitelabel/domains (.../domain-authentication/list-all-authenticated-domains);
Postmark GET /server (postmarkapp.com/developer/api/server-api, DeliveryType in
postmarkapp.com/developer/api/servers-api); Mailgun GET /v3/domains/{name}
(documentation.mailgun.com/docs/mailgun/api-reference/openapi-final/tag/Domains); SES v2
GetAccount, GetEmailIdentity, GetConfigurationSet (docs.aws.amazon.com/ses/latest/APIReference-V2/).
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import aiohttp
import pytest

from shared.preflight import Check, Status
from shared.preflight.run import run
from shared.preflight.ses import _account
from shared.providers import ses
from shared.providers.kind import ProviderConfig
from shared.providers.registry import open_provider
from shared.settings import EmailSettings
from tests.providers.kinds import DOMAIN, KINDS, config
from tests.providers.moto_patient import TIMEOUTS, moto_url, patient_moto  # noqa: F401
from tests.providers.test_ses_moto import REGION, _v1, aws_env  # noqa: F401
from tests.support.sandbox import run_sandbox

EMAIL = EmailSettings(email_from="Studio Inc. <no-reply@studio.example>")


async def _checks(cfg: ProviderConfig, email: EmailSettings = EMAIL) -> dict[str, Check]:
    async with aiohttp.ClientSession() as session, open_provider(cfg, session) as provider:
        found = await run(cfg, provider, session, email)
    return {c.check: c for c in found}


def _failed(found: dict[str, Check]) -> list[str]:
    return sorted(name for name, c in found.items() if c.status is Status.FAILED)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_provider_configured_right_has_no_failing_check(kind: str) -> None:
    async with run_sandbox(mode=kind) as url:
        found = await _checks(config(kind, url))
    assert _failed(found) == [] and found["key"].status is Status.OK


@pytest.mark.parametrize("kind", KINDS)
async def test_a_wrong_key_fails_the_key_check_with_the_fix(kind: str) -> None:
    async with run_sandbox(mode=kind, api_key="the-right-key") as url:
        found = await _checks(config(kind, url, key="a-wrong-key"))
    assert found["key"].status is Status.FAILED and "valid" in found["key"].detail


@pytest.mark.parametrize("kind", ["sendgrid", "mailgun"])
async def test_a_from_domain_the_provider_lacks_fails(kind: str) -> None:
    async with run_sandbox(mode=kind, domains=f"{DOMAIN},game.example") as url:
        found = await _checks(config(kind, url))
    assert found["from_domain"].status is Status.FAILED
    assert "studio.example" in found["from_domain"].detail


async def test_a_mailgun_domain_on_the_other_region_names_the_region() -> None:
    """Mailgun answers 404 for a domain on the other region's base URL (Domains page)."""
    async with run_sandbox(mode="mailgun", domains="studio.example") as url:
        found = await _checks(config("mailgun", url))
    assert found["domain"].status is Status.FAILED
    assert "https://api.eu.mailgun.net" in found["domain"].detail


async def test_an_unverified_mailgun_domain_fails() -> None:
    async with run_sandbox(
        mode="mailgun", domains="studio.example", unverified_domains=DOMAIN
    ) as url:
        found = await _checks(config("mailgun", url))
    assert found["domain"].status is Status.FAILED and "unverified" in found["domain"].detail


async def test_a_sendgrid_key_without_mail_send_fails() -> None:
    async with run_sandbox(mode="sendgrid", key_scopes="whitelabel.read") as url:
        found = await _checks(config("sendgrid", url))
    assert found["key"].status is Status.FAILED and "mail.send" in found["key"].detail


async def test_a_scope_that_cannot_read_domains_says_unknown_not_failed() -> None:
    """The opposite harm: a key allowed to send but not to read sender authentication must
    not fail the preflight (SendGrid answers 403 to what the scope does not cover)."""
    async with run_sandbox(mode="sendgrid", key_scopes="mail.send") as url:
        found = await _checks(config("sendgrid", url))
    assert found["from_domain"].status is Status.UNKNOWN and _failed(found) == []


async def test_a_postmark_sandbox_server_fails_delivery() -> None:
    async with run_sandbox(mode="postmark", server_delivery_type="Sandbox") as url:
        found = await _checks(config("postmark", url))
    assert found["delivery"].status is Status.FAILED
    assert found["from_domain"].status is Status.UNKNOWN  # a server token cannot tell


async def test_an_unreadable_from_fails_naming_its_setting() -> None:
    async with run_sandbox(mode="postmark") as url:
        found = await _checks(
            config("postmark", url),
            EmailSettings(email_from="Studio, Inc. <no-reply@studio.example>"),
        )
    assert found["from"].status is Status.FAILED
    assert found["from"].detail.startswith("RESETGATE_EMAIL_FROM:")


# -- SES on moto -----------------------------------------------------------------------------
def _ses(url: str, configuration_set: str = "resets") -> ProviderConfig:
    own = {"ses_configuration_set": configuration_set, "ses_region": REGION}
    return config("ses", url, name="ses", **own, **TIMEOUTS)


async def _ses_account(url: str) -> None:
    await _v1(url, "verify_domain_identity", Domain="studio.example")
    await _v1(url, "create_configuration_set", ConfigurationSet={"Name": "resets"})  # type: ignore[arg-type]


async def test_ses_configured_right_has_no_failing_check(moto_url: str) -> None:  # noqa: F811
    await _ses_account(moto_url)
    found = await _checks(_ses(moto_url))
    assert _failed(found) == []
    assert found["identity"].status is Status.OK
    assert found["configuration_set"].status is Status.OK
    # moto 5.2 has no SESv2 GetAccount: the account checks cannot be answered there.
    assert found["account"].status is Status.UNKNOWN


async def test_an_unverified_ses_identity_fails(moto_url: str) -> None:  # noqa: F811
    await _v1(moto_url, "create_configuration_set", ConfigurationSet={"Name": "resets"})  # type: ignore[arg-type]
    found = await _checks(_ses(moto_url))
    assert _failed(found) == ["identity"] and "verify the domain" in found["identity"].detail


async def test_a_missing_ses_configuration_set_fails(moto_url: str) -> None:  # noqa: F811
    await _v1(moto_url, "verify_domain_identity", Domain="studio.example")
    found = await _checks(_ses(moto_url))
    assert (
        _failed(found) == ["configuration_set"] and "create it" in found["configuration_set"].detail
    )


async def test_without_a_configuration_set_the_preflight_says_no_events(moto_url: str) -> None:  # noqa: F811
    await _v1(moto_url, "verify_domain_identity", Domain="studio.example")
    found = await _checks(_ses(moto_url, configuration_set=""))
    assert "publishes no events" in found["configuration_set"].detail
    assert found["configuration_set"].status is Status.FAILED


def test_an_ses_account_in_the_sandbox_fails_and_production_passes() -> None:
    """GetAccount's documented reply (API_GetAccount.html); moto cannot give it."""
    sandboxed = {
        "SendingEnabled": True,
        "ProductionAccessEnabled": False,
        "SendQuota": {"Max24HourSend": 200.0, "MaxSendRate": 1.0},
    }
    account, production = _account("ses", sandboxed)
    assert account.status is Status.OK and "200.0/24 h" in account.detail
    assert production.status is Status.FAILED and "request production access" in production.detail
    _, live = _account("ses", {**sandboxed, "ProductionAccessEnabled": True})
    assert live.status is Status.OK
    paused, _ = _account("ses", {**sandboxed, "SendingEnabled": False})
    assert paused.status is Status.FAILED


# -- the command ---------------------------------------------------------------------------
async def _command(env: dict[str, str]) -> tuple[int, str]:
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "services.ctl.main",
        "providers",
        "check",
        env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(child.communicate(), 120)
    return int(child.returncode or 0), out.decode()


def _env(kind: str, url: str, **more: Any) -> dict[str, str]:
    return {
        "RESETGATE_PROVIDER_KIND": kind,
        "RESETGATE_PROVIDER_URL": url,
        "RESETGATE_PROVIDER_API_KEY": "sandbox-key",
        "RESETGATE_MAILGUN_DOMAIN": DOMAIN,
        "RESETGATE_EMAIL_FROM": "Studio Inc. <no-reply@studio.example>",
        "RESETGATE_MAILGUN_WEBHOOK_SIGNING_KEY": "k",
        **more,
    }


async def test_the_command_exits_0_when_all_is_right_and_1_naming_the_fix() -> None:
    async with run_sandbox(mode="mailgun") as url:
        ok, out = await _command(_env("mailgun", url))
        assert ok == 0, out
        assert "no check failed" in out
        bad, out = await _command(_env("mailgun", url, RESETGATE_PROVIDER_API_KEY="wrong"))
    assert bad == 1 and "key" in out and "set the provider's API key" in out


async def test_the_command_says_when_no_events_reach_the_poller() -> None:
    async with run_sandbox(mode="mailgun") as url:
        code, out = await _command(_env("mailgun", url, RESETGATE_MAILGUN_WEBHOOK_SIGNING_KEY=""))
    assert code == 1 and "no mailgun events reach the poller" in out


def test_the_ses_request_keeps_its_configuration_set() -> None:
    shaped = ses.request(
        "op-1",
        {"from": "a@b.example", "to": ["p@example.com"], "subject": "s", "text": "t"},
        "resets",
    )
    assert shaped["ConfigurationSetName"] == "resets" and REGION

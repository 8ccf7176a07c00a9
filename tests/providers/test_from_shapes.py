"""The From as studios write it reaches each provider as that address with that name.

Pages: Postmark refuses punctuation in an unquoted display name with ErrorCode 300
(postmarkapp.com/support/article/1180-what-does-errorcode-300-mean; the sandbox enforces it);
SendGrid's Mail Send takes ``from: {email, name}``
(twilio.com/docs/sendgrid/api-reference/mail-send/mail-send); Mailgun a ``from`` form field
(documentation.mailgun.com/docs/mailgun/api-reference/send/mailgun/messages); SES v2
``FromEmailAddress`` with a non-ASCII name RFC 2047-encoded
(docs.aws.amazon.com/ses/latest/APIReference-V2/API_SendEmail.html).
"""

from __future__ import annotations

from email.headerregistry import HeaderRegistry

import aiohttp
import pytest

from shared.from_address import FromError, parse
from shared.model import Outcome
from shared.providers import ses
from shared.settings import Brand, EmailSettings
from tests.providers.kinds import KINDS, adapter
from tests.providers.moto_patient import TIMEOUTS, moto_url, patient_moto  # noqa: F401
from tests.providers.test_ses_moto import REGION, _v1, aws_env  # noqa: F401
from tests.support.sandbox import run_sandbox, sent_emails

WRITTEN = ("Studio Inc. <no-reply@studio.example>", '"Studio, Inc." <no-reply@studio.example>')
NAMES = {WRITTEN[0]: "Studio Inc.", WRITTEN[1]: "Studio, Inc."}


def _message(sender: str) -> dict[str, object]:
    return {"from": sender, "to": ["p@example.com"], "subject": "Reset", "text": "link"}


def _read(header: str) -> tuple[str, str]:
    found = HeaderRegistry()("From", header).addresses
    assert len(found) == 1, header
    return found[0].display_name, found[0].addr_spec


@pytest.mark.parametrize("written", WRITTEN)
@pytest.mark.parametrize("kind", KINDS)
async def test_a_from_with_punctuation_reaches_the_provider_as_written(
    kind: str, written: str
) -> None:
    async with run_sandbox(mode=kind) as url, aiohttp.ClientSession() as session:
        result = await adapter(kind, session, url).send("op-3-FROM", _message(written))
        assert result.outcome is Outcome.ACCEPTED, result
        emails = await sent_emails(url, operation_id="op-3-FROM")
    assert _read(emails[0]["email"]["from"]) == (NAMES[written], "no-reply@studio.example")


async def test_the_postmark_sandbox_refuses_an_unquoted_name_with_punctuation() -> None:
    """The harm the quoting prevents: article 1180's ErrorCode 300, on every send."""
    async with run_sandbox(mode="postmark") as url, aiohttp.ClientSession() as session:
        body = {"From": WRITTEN[0], "To": "p@example.com", "Subject": "s", "TextBody": "t"}
        headers = {"X-Postmark-Server-Token": "sandbox-key", "Accept": "application/json"}
        async with session.post(url + "/email", json=body, headers=headers) as response:
            answer = await response.json()
    assert response.status == 422 and answer["ErrorCode"] == 300


def test_sendgrid_gets_the_name_and_the_address_apart() -> None:
    from shared.providers.sendgrid import address

    assert address(WRITTEN[1]) == {"email": "no-reply@studio.example", "name": "Studio, Inc."}
    assert address("no-reply@studio.example") == {"email": "no-reply@studio.example"}


def test_ses_gets_a_non_ascii_name_encoded() -> None:
    shaped = ses.request("op-1", _message("Stüdio Ünï <no-reply@studio.example>"))
    sender = str(shaped["FromEmailAddress"])
    assert sender.isascii() and sender.startswith("=?utf-8?")
    assert _read(sender) == ("Stüdio Ünï", "no-reply@studio.example")


@pytest.mark.parametrize(
    "text",
    [
        "Studio, Inc. <no-reply@studio.example>",
        "Studio",
        "no-reply@",
        "Studio <no-reply@studio.example",
        "a@b.example\r\nBcc: x@y.example",
    ],
)
def test_an_ambiguous_or_unreadable_from_is_refused(text: str) -> None:
    with pytest.raises(FromError):
        parse(text)


def test_the_comma_refusal_says_how_to_quote() -> None:
    with pytest.raises(FromError, match=r"unquoted comma.*quote the display name"):
        parse("Studio, Inc. <no-reply@studio.example>")


ORDINARY = [
    "no-reply@studio.example",
    "Account Recovery <a@b.example>",
    "O'Brien & Co. <a@b.example>",
    "Stüdio <a@b.example>",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_froms_are_accepted(text: str) -> None:
    """The opposite harm: a From a studio may well write must not stop the sender."""
    assert parse(text).email.endswith(".example")


def test_every_brands_from_is_checked_and_named() -> None:
    from shared.from_address import settings_problems

    settings = EmailSettings(
        brands={
            "moon": Brand(name="Moon", email_from="Moon, Ltd. <no-reply@moon.example>"),
            "sun": Brand(name="Sun", email_from="Sun Inc. <no-reply@sun.example>"),
        }
    )
    found = settings_problems(settings)
    assert len(found) == 1 and found[0].startswith("RESETGATE_BRANDS (brand 'moon' email_from)")
    assert "moon.example" not in found[0]  # the line names the setting, not the address


def test_an_unquoted_comma_stops_the_sender_with_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from shared.emails import check

    with pytest.raises(SystemExit) as stopped:
        check.load_or_exit(EmailSettings(email_from="Studio, Inc. <no-reply@studio.example>"))
    lines = capsys.readouterr().err.strip().splitlines()
    assert stopped.value.code == 2 and len(lines) == 1
    assert lines[0].startswith("invalid configuration: RESETGATE_EMAIL_FROM: the From reads as 2")


@pytest.mark.parametrize("written", [*WRITTEN, "Stüdio Ünï <no-reply@studio.example>"])
async def test_ses_on_moto_takes_the_from_as_that_address_with_that_name(
    moto_url: str,  # noqa: F811  (the fixture of moto_patient, imported above)
    written: str,
) -> None:
    await _v1(moto_url, "verify_domain_identity", Domain="studio.example")
    provider = ses.SesProvider(REGION, moto_url, **TIMEOUTS)
    try:
        result = await provider.send("op-3-FROM", _message(written))
    finally:
        await provider.aclose()
    assert result.outcome is Outcome.ACCEPTED, result
    async with (
        aiohttp.ClientSession() as session,
        session.get(moto_url + "/moto-api/data.json") as response,
    ):
        state = await response.json(content_type=None)
    sources = [m["source"] for m in _sent(state)]
    name = NAMES.get(written, "Stüdio Ünï")
    assert [_read(s) for s in sources] == [(name, "no-reply@studio.example")]


def _sent(state: object) -> list[dict[str, str]]:
    """moto's recorded SES messages, wherever data.json nests them."""
    found: list[dict[str, str]] = []
    if isinstance(state, dict):
        if "source" in state and "destinations" in state:
            return [state]
        for value in state.values():
            found += _sent(value)
    elif isinstance(state, list):
        for value in state:
            found += _sent(value)
    return found


def test_templates_check_lists_every_from_that_cannot_be_read(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from services.ctl.main import main

    monkeypatch.setenv("RESETGATE_EMAIL_FROM", "Studio Inc. <no-reply@studio.example>")
    monkeypatch.setenv(
        "RESETGATE_BRANDS",
        '{"moon": {"name": "Moon", "email_from": "Moon, Ltd. <no-reply@moon.example>"},'
        ' "sun": {"name": "Sun", "email_from": "sun"}}',
    )
    assert main(["templates", "check"]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert [line.split(":")[1].strip() for line in lines] == [
        "RESETGATE_BRANDS (brand 'moon' email_from)",
        "RESETGATE_BRANDS (brand 'sun' email_from)",
    ]

"""Whose refusal an answer is (shared.providers.base.Refusal, docs/providers.md "Whose refusal
is it"): SES's words, and the refusals guard's count.

SES pages: "Email address is not verified. The following identities failed the check in
region …: identity1, identity2"
(docs.aws.amazon.com/ses/latest/dg/troubleshoot-error-messages.html); in the SES sandbox
the recipient must be verified as well
(docs.aws.amazon.com/ses/latest/dg/request-production-access.html); SendEmail's
``ConfigurationSetName`` (docs.aws.amazon.com/ses/latest/APIReference-V2/API_SendEmail.html,
NotFoundException "The resource you attempted to access doesn't exist", BadRequestException
"The input you provided is invalid").
"""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from services.sender.guard import RefusalGuard, Refused
from shared.model import Outcome
from shared.providers.base import Refusal
from shared.providers.ses import classify_error

MESSAGE = {
    "from": "Recovery <no-reply@game.example>",
    "to": ["Player@Example.com"],
    "subject": "Reset",
    "text": "link",
}
UNVERIFIED = "Email address is not verified. The following identities failed the check in region "


def _ses(code: str, words: str) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": words}, "ResponseMetadata": {"HTTPStatusCode": 400}},
        "SendEmail",
    )


def test_an_ses_sandbox_recipient_fails_that_reset_only() -> None:
    result = classify_error(
        _ses("MessageRejected", UNVERIFIED + "EU-WEST-1: player@example.com"), message=MESSAGE
    )
    assert (result.outcome, result.refusal) == (Outcome.PERMANENT, Refusal.RECIPIENT)
    assert result.reason == "recipient_not_verified"


@pytest.mark.parametrize(
    "named", ["no-reply@game.example", "game.example", "no-reply@game.example, player@example.com"]
)
def test_an_unverified_from_identity_pauses_ses(named: str) -> None:
    words = UNVERIFIED + "EU-WEST-1: " + named
    result = classify_error(_ses("MessageRejected", words), message=MESSAGE)
    assert (result.outcome, result.pause, result.detail) == (Outcome.AUTH, "account", words)


def test_an_unverified_identity_ses_names_no_way_we_know_pauses() -> None:
    """Neither the From nor only this send's recipients: taken as ours (a pause, SES's words)."""
    words = UNVERIFIED + "EU-WEST-1: bounce@other.example"
    assert classify_error(_ses("MessageRejected", words), message=MESSAGE).outcome is Outcome.AUTH
    assert classify_error(_ses("MessageRejected", UNVERIFIED + "x")).outcome is Outcome.AUTH


@pytest.mark.parametrize(
    ("code", "words"),
    [
        ("NotFoundException", "Configuration set <resetgate-events> does not exist."),
        ("BadRequestException", "Configuration set name resetgate events is invalid."),
    ],
)
def test_a_configuration_set_refusal_pauses_ses(code: str, words: str) -> None:
    result = classify_error(_ses(code, words), message=MESSAGE)
    assert (result.outcome, result.pause, result.detail) == (Outcome.AUTH, "account", words)


def test_a_not_found_ses_does_not_explain_is_undocumented() -> None:
    result = classify_error(_ses("NotFoundException", "Resource not found"), message=MESSAGE)
    assert (result.outcome, result.refusal) == (Outcome.PERMANENT, Refusal.UNDOCUMENTED)


def _refused(
    guard: RefusalGuard, op: str, at: int, account: str = "", recipient: str = "", reason: str = "r"
) -> object:
    return guard.refused(Refused(op, account or f"acct-{op}", at, recipient or f"to-{op}"), reason)


def test_the_guard_counts_distinct_operations_accounts_and_recipients() -> None:
    guard = RefusalGuard(3, window_ms=1000)
    assert _refused(guard, "a", 0) is None and _refused(guard, "a", 1) is None  # not distinct
    assert _refused(guard, "b", 2) is None
    trip = _refused(guard, "c", 3)
    assert trip is not None and [r.operation_id for r in trip.streak] == ["a", "b", "c"]
    assert trip.reason == "r"
    guard = RefusalGuard(3, window_ms=1000)  # one account's operations count once
    _refused(guard, "a", 0, account="x"), _refused(guard, "b", 1, account="x")
    assert _refused(guard, "c", 2, account="x") is None
    guard = RefusalGuard(3, window_ms=1000)  # one address behind many accounts counts once
    _refused(guard, "a", 0, recipient="same"), _refused(guard, "b", 1, recipient="same")
    assert _refused(guard, "c", 2, recipient="same") is None
    guard = RefusalGuard(3, window_ms=1000)
    _refused(guard, "a", 0), _refused(guard, "b", 1, reason="other")  # a new streak
    assert _refused(guard, "c", 2, reason="other") is None
    guard = RefusalGuard(3, window_ms=1000)
    _refused(guard, "a", 0), _refused(guard, "b", 1)
    assert _refused(guard, "c", 1500) is None  # "a" is older than the window
    guard.accepted()  # any acceptance ends the streak
    assert _refused(guard, "d", 1600) is None and _refused(guard, "e", 1700) is None

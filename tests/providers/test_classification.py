"""Every documented answer of each provider's send, classified; on a real HTTP server.

Sources (the adapters' modules hold the full list):
SendGrid https://www.twilio.com/docs/sendgrid/api-reference/how-to-use-the-sendgrid-v3-api/errors
and .../rate-limits; Postmark https://postmarkapp.com/developer/api/overview#error-codes;
Mailgun https://documentation.mailgun.com/docs/mailgun/quickstart-guide/responses.
"""

from __future__ import annotations

import time

import aiohttp
import orjson
import pytest

from shared.model import Outcome
from shared.providers.base import Refusal
from shared.providers.postmark import ERROR_CODES, RECIPIENT_CODES
from tests.providers.conftest import Scripted
from tests.providers.kinds import DOMAIN, JSON, KINDS, adapter, success

A, T, P, TH, AU, AM = (
    Outcome.ACCEPTED,
    Outcome.TRANSIENT,
    Outcome.PERMANENT,
    Outcome.THROTTLED,
    Outcome.AUTH,
    Outcome.AMBIGUOUS,
)
MESSAGE = {
    "from": "Recovery <no-reply@game.example>",
    "to": ["p@example.com"],
    "subject": "Reset",
    "text": "link",
    "html": "<a>link</a>",
}
SG_ERR = orjson.dumps({"errors": [{"field": None, "message": "x"}]})
MG_ERR = orjson.dumps({"message": "x"})
PM_ERR = orjson.dumps({"ErrorCode": 0, "Message": "x"})
DOCUMENTED_ERROR = {"sendgrid": SG_ERR, "mailgun": MG_ERR, "postmark": PM_ERR}
GATEWAY_PAGE = (
    b"<html><body><h1>502 Bad Gateway</h1></body></html>",
    {"Content-Type": "text/html"},
)

SENDGRID = [
    (400, P, "bad_request"),
    (401, AU, "http_401"),
    (403, AU, "http_403"),
    (404, AU, "not_found"),
    (406, AU, "not_acceptable"),
    (413, AU, "payload_too_large"),
    (415, AU, "unsupported_media_type"),
    (451, AU, "data_residency"),
    (429, TH, "rate_limited"),
    (500, AM, "unproven_500"),
    (503, AM, "unproven_503"),
    (408, AM, "unproven_408"),
    (418, P, "http_418"),
    (200, AM, "undocumented_200"),
    (201, AM, "undocumented_201"),
    (204, AM, "undocumented_204"),
]
MAILGUN = [
    (400, P, "bad_request"),
    (401, AU, "http_401"),
    (403, AU, "http_403"),
    (404, T, "http_404"),
    (413, AU, "payload_too_large"),
    (429, TH, "http_429"),
    (500, AM, "unproven_500"),
    (502, AM, "unproven_502"),
    (408, AM, "unproven_408"),
    (418, P, "http_418"),
    (201, AM, "undocumented_201"),
    (204, AM, "undocumented_204"),
]
POSTMARK_STATUS = [
    (401, AU, "unauthorized"),
    (404, AU, "entity_does_not_exist"),
    (413, AU, "payload_too_large"),
    (415, AU, "unsupported_media_type"),
    (429, TH, "rate_limit_exceeded"),
    (500, AM, "unproven_500"),
    (503, AM, "unproven_503"),
    (408, AM, "unproven_408"),
    (418, P, "http_418"),
    (201, AM, "undocumented_201"),
    (204, AM, "undocumented_204"),
]


async def _send(kind: str, scripted: Scripted) -> object:
    async with aiohttp.ClientSession() as session:
        return await adapter(kind, session, scripted.url).send("op-1-ABC", MESSAGE)


@pytest.mark.parametrize(("status", "outcome", "reason"), SENDGRID)
async def test_sendgrid_statuses(
    scripted: Scripted, status: int, outcome: Outcome, reason: str
) -> None:
    scripted.script((status, JSON, SG_ERR if status >= 400 else b""))
    result = await _send("sendgrid", scripted)
    assert (result.outcome, result.status, result.reason) == (outcome, status, reason)


async def test_sendgrid_429_waits_until_x_ratelimit_reset(scripted: Scripted) -> None:
    reset = int(time.time()) + 7
    scripted.script(
        (
            429,
            {
                **JSON,
                "X-RateLimit-Limit": "600",
                "X-RateLimit-Remaining": "0",
                "X-RateLimit-Reset": str(reset),
            },
            SG_ERR,
        )
    )
    result = await _send("sendgrid", scripted)
    assert result.outcome is TH and result.retry_source == "x-ratelimit-reset"
    assert 6 <= int(result.retry_after) <= 8
    assert result.rate is not None and (result.rate.limit, result.rate.remaining) == (600, 0)
    assert result.rate.reset_at == reset


@pytest.mark.parametrize(("status", "outcome", "reason"), MAILGUN)
async def test_mailgun_statuses(
    scripted: Scripted, status: int, outcome: Outcome, reason: str
) -> None:
    scripted.script((status, JSON, MG_ERR))
    result = await _send("mailgun", scripted)
    assert (result.outcome, result.status, result.reason) == (outcome, status, reason)


@pytest.mark.parametrize(("status", "outcome", "reason"), POSTMARK_STATUS)
async def test_postmark_statuses(
    scripted: Scripted, status: int, outcome: Outcome, reason: str
) -> None:
    scripted.script((status, JSON, PM_ERR))
    result = await _send("postmark", scripted)
    assert (result.outcome, result.status, result.reason) == (outcome, status, reason)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("status", [500, 502, 503, 504])
@pytest.mark.parametrize("body", ["gateway page", "empty", "json of another shape"])
async def test_a_5xx_without_the_providers_error_body_is_ambiguous_not_transient(
    scripted: Scripted, kind: str, status: int, body: str
) -> None:
    """The request was written and nothing says it was refused: sending again without a key
    may be a second email (the provider, or a gateway in front of it, may have taken it)."""
    answers = {
        "gateway page": (GATEWAY_PAGE[1], GATEWAY_PAGE[0]),
        "empty": ({}, b""),
        "json of another shape": (JSON, orjson.dumps({"error": "upstream"})),
    }
    headers, raw = answers[body]
    scripted.script((status, headers, raw))
    result = await _send(kind, scripted)
    assert (result.outcome, result.status, result.reason) == (AM, status, f"unproven_{status}")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("status", [500, 503, 408])
async def test_a_5xx_or_408_in_the_providers_documented_error_shape_is_still_ambiguous(
    scripted: Scripted, kind: str, status: int
) -> None:
    """SendGrid's ``{"errors": [{"message"}]}``, Postmark's ``{"ErrorCode", "Message"}``,
    Mailgun's ``{"message"}``: none of their pages says such an answer means the mail was
    not taken, and the body was written: a blind resend may be a second email."""
    scripted.script((status, JSON, DOCUMENTED_ERROR[kind]))
    result = await _send(kind, scripted)
    assert (result.outcome, result.reason) == (AM, f"unproven_{status}")


@pytest.mark.parametrize("code", sorted(ERROR_CODES))
async def test_postmark_422_is_classified_by_error_code(scripted: Scripted, code: int) -> None:
    """postmarkapp.com/developer/api/overview#error-codes: 300 and 406 are about the
    recipient (they fail the reset); every other refusal code is about our side (a pause)."""
    scripted.script((422, JSON, orjson.dumps({"ErrorCode": code, "Message": "x"})))
    result = await _send("postmark", scripted)
    outcome, reason = ERROR_CODES[code]
    if outcome is P and code not in RECIPIENT_CODES:
        outcome = AU
    assert (result.outcome, result.reason) == (outcome, reason)
    if outcome is P:
        assert result.refusal is Refusal.RECIPIENT


async def test_postmark_unknown_error_code_is_undocumented(scripted: Scripted) -> None:
    scripted.script((422, JSON, orjson.dumps({"ErrorCode": 9999, "Message": "x"})))
    result = await _send("postmark", scripted)
    assert (result.outcome, result.reason, result.refusal) == (
        P,
        "error_code_9999",
        Refusal.UNDOCUMENTED,
    )


@pytest.mark.parametrize(
    ("words", "outcome"),
    [
        ("Invalid 'From' address: 'sender@example.com' is not a verified sender signature.", AU),
        ("Invalid 'To' address: 'p@'.", P),
    ],
)
async def test_postmark_300_naming_the_from_pauses_and_naming_the_to_fails_the_reset(
    scripted: Scripted, words: str, outcome: Outcome
) -> None:
    """ErrorCode 300 (postmarkapp.com/support/article/troubleshooting-422-unprocessable-entity-
    errors: "Invalid 'From' address: … is not a verified sender signature"): about our sender
    when its words name the From; otherwise about the request's recipient."""
    scripted.script((422, JSON, orjson.dumps({"ErrorCode": 300, "Message": words})))
    result = await _send("postmark", scripted)
    assert result.outcome is outcome, result
    if outcome is AU:
        assert (result.pause, result.detail) == ("account", words)


async def test_postmark_404_pauses_with_its_words(scripted: Scripted) -> None:
    """postmarkapp.com/developer/api/overview: 404 "ensure the endpoint … are correct"."""
    scripted.script((404, JSON, orjson.dumps({"ErrorCode": 0, "Message": "Not found"})))
    result = await _send("postmark", scripted)
    assert (result.outcome, result.pause, result.detail) == (AU, "account", "Not found")


async def test_a_mailgun_404_without_json_pauses_naming_the_base_url(scripted: Scripted) -> None:
    """documentation.mailgun.com/docs/mailgun/quickstart-guide/responses: a 404 is "a mistake
    in the API request, such as a non-existing endpoint" (a base URL ending in /v3)."""
    scripted.script((404, {"Content-Type": "text/html"}, b"<html>404 page not found</html>"))
    result = await _send("mailgun", scripted)
    assert (result.outcome, result.pause, result.reason) == (AU, "account", "endpoint_not_found")
    assert "base URL" in result.detail


@pytest.mark.parametrize(
    ("field", "refusal"),
    [
        ("personalizations.0.to.0.email", Refusal.RECIPIENT),
        ("from.email", None),
        ("content.0.value", None),
        (None, Refusal.UNDOCUMENTED),
    ],
)
async def test_sendgrid_400_names_whose_field_it_is(
    scripted: Scripted, field: str | None, refusal: Refusal | None
) -> None:
    """twilio.com/docs/sendgrid/api-reference/how-to-use-the-sendgrid-v3-api/errors: each
    error names its ``field``: the recipient's fails the reset, the From or the content we
    build pauses (None), no field at all is undocumented."""
    body = orjson.dumps(
        {"errors": [{"field": field, "message": "Does not contain a valid address."}]}
    )
    scripted.script((400, JSON, body))
    result = await _send("sendgrid", scripted)
    if refusal is None:
        assert (result.outcome, result.pause) == (AU, "account"), result
    else:
        assert (result.outcome, result.refusal) == (P, refusal), result


@pytest.mark.parametrize(
    ("text", "refusal"),
    [
        ("'to' parameter is not a valid address. please check documentation", Refusal.RECIPIENT),
        ("Sandbox: refused by a rule no documentation names", Refusal.UNDOCUMENTED),
    ],
)
async def test_a_mailgun_400_fails_the_reset_only_when_it_names_the_recipient(
    scripted: Scripted, text: str, refusal: Refusal
) -> None:
    """documentation.mailgun.com/docs/mailgun/quickstart-guide/responses: a 400 carries a
    message; one about the ``to`` is the recipient's, any other nobody documents."""
    scripted.script((400, JSON, _mailgun_says(text)))
    result = await _send("mailgun", scripted)
    assert (result.outcome, result.refusal) == (P, refusal)


async def test_postmark_200_with_an_error_code_is_not_acceptance(scripted: Scripted) -> None:
    scripted.script((200, JSON, orjson.dumps({"ErrorCode": 406, "Message": "x"})))
    assert (await _send("postmark", scripted)).outcome is AM


@pytest.mark.parametrize("kind", KINDS)
async def test_documented_success_is_accepted_with_the_message_id(
    scripted: Scripted, kind: str
) -> None:
    scripted.script(success(kind, "m-42"))
    result = await _send(kind, scripted)
    assert (result.outcome, result.message_id) == (A, "m-42")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("status", [301, 302, 307, 308])
async def test_no_adapter_follows_a_redirect(scripted: Scripted, kind: str, status: int) -> None:
    scripted.script((status, {"Location": scripted.url + "/elsewhere"}, b""))
    result = await _send(kind, scripted)
    assert (result.outcome, result.reason) == (T, "redirect_not_followed")
    assert [r[1] for r in scripted.requests if r[1].startswith("/elsewhere")] == []


def _mailgun_says(text: str) -> bytes:
    return orjson.dumps({"message": text})


@pytest.mark.parametrize("status", [420, 429])
async def test_mailgun_throttle_wait_is_read_from_its_message_first(
    scripted: Scripted, status: int
) -> None:
    """Mailgun states the wait in its text ("… try again after <date>", as
    github.com/mailgun/mailgun-java/issues/50 shows it): trusted before Retry-After."""
    at = time.strftime("%a, %d %b %Y %H:%M:%S UTC", time.gmtime(time.time() + 120))
    text = f"Domain {DOMAIN} is not allowed to send: recipient limit exceeded, try again after {at}"
    scripted.script(
        (status, {**JSON, "Retry-After": "5", "X-RateLimit-Reset": "1"}, _mailgun_says(text))
    )
    result = await _send("mailgun", scripted)
    assert (result.outcome, result.retry_source) == (TH, "message")
    # kept the instant it states (an HTTP date), not a delay rounded to whole seconds
    assert result.retry_after == at.replace("UTC", "GMT")


async def test_mailgun_throttle_wait_falls_back_to_retry_after_then_rate_reset(
    scripted: Scripted,
) -> None:
    scripted.script((429, {**JSON, "Retry-After": "7"}, _mailgun_says("Too many requests")))
    result = await _send("mailgun", scripted)
    assert (result.outcome, result.retry_after, result.retry_source) == (TH, "7", "")
    reset = int(time.time()) + 30
    scripted.script((429, {**JSON, "X-RateLimit-Reset": str(reset)}, _mailgun_says("slow")))
    result = await _send("mailgun", scripted)
    assert (result.outcome, result.retry_source) == (TH, "x-ratelimit-reset")
    assert 28 <= int(result.retry_after) <= 31


@pytest.mark.parametrize(
    ("status", "text", "reason"),
    [
        (
            400,
            "Domain mg.game.example is not allowed to send: Please activate your Mailgun "
            "account. Check your inbox",
            "domain_not_allowed",
        ),
        (400, "Please activate your Mailgun account. Check your inbox", "account_not_activated"),
        (
            400,
            "Free accounts are for test purposes only. Please upgrade or add the address to "
            "authorized recipients in Account Settings.",
            "free_account",
        ),
        (404, "Domain not found: mg.game.example", "domain_not_found"),
    ],
)
async def test_mailgun_account_refusals_pause_with_mailguns_words(
    scripted: Scripted, status: int, text: str, reason: str
) -> None:
    scripted.script((status, JSON, _mailgun_says(text)))
    result = await _send("mailgun", scripted)
    assert (result.outcome, result.pause, result.reason, result.detail) == (
        AU,
        "account",
        reason,
        text,
    )


async def test_a_mailgun_json_404_without_domain_not_found_stays_transient(
    scripted: Scripted,
) -> None:
    scripted.script((404, JSON, _mailgun_says("Not found")))
    assert (await _send("mailgun", scripted)).outcome is T


@pytest.mark.parametrize(("body", "pause"), [(b"", "account"), (b"<html>403</html>", "account")])
async def test_postmark_403_without_an_error_code_pauses_the_account(
    scripted: Scripted, body: bytes, pause: str
) -> None:
    scripted.script((403, {"Content-Type": "text/html"}, body))
    result = await _send("postmark", scripted)
    assert (result.outcome, result.pause) == (AU, pause)

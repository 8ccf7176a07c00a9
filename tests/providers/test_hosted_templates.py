"""Provider-hosted templates: each adapter sends the documented request shape, each
provider's sandbox accepts it and answers a missing template as the provider does, and a
missing template pauses the provider (an account-level refusal) instead of failing resets.

Sources: SendGrid Mail Send (https://www.twilio.com/docs/sendgrid/api-reference/mail-send/mail-send:
``template_id``, ``personalizations[].dynamic_template_data``); Postmark Templates API
(https://postmarkapp.com/developer/api/templates-api: ``POST /email/withTemplate``,
``TemplateAlias``, ``TemplateModel``; 422 ErrorCode 1101 for a missing template, from
https://postmarkapp.com/developer/api/overview#error-codes); Mailgun
(https://documentation.mailgun.com/docs/mailgun/user-manual/sending-messages/send-templates:
``template``, ``t:variables``); SES v2 SendEmail
(https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_SendEmail.html: ``Content.Template``
with ``TemplateName`` and ``TemplateData``; NotFoundException).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

import aiohttp
import orjson
import pytest
from botocore.exceptions import ClientError
from botocore.session import get_session
from botocore.validate import ParamValidator
from redis.asyncio import Redis

from services.ctl.embedded import RedisServer
from shared.control import read as read_control
from shared.directory import Account, RedisDirectory
from shared.model import Outcome, State
from shared.operations import load_attempts
from shared.providers import ses
from tests.providers.conftest import Scripted
from tests.providers.kinds import DOMAIN, KINDS, adapter, success
from tests.sender.conftest import Stack, wait_for
from tests.support.sandbox import run_sandbox, sent_emails

TEMPLATE = "password-reset-{locale}"
HOSTED = {"provider_template": TEMPLATE, "provider_template_locales": "en,fr,ja"}
VARIABLES = {
    "link",
    "operation_id",
    "expires_at",
    "expires_in_minutes",
    "brand",
    "locale",
    "direction",
}


def overrides(kind: str, **more: object) -> dict[str, object]:
    return {
        "provider_kind": kind,
        "provider_name": kind,
        "mailgun_domain": DOMAIN,
        "reconcile_grace_seconds": 0,
        "mailgun_events_delay_seconds": 0,
        **HOSTED,
        **more,
    }


async def admit(stack: Stack, account_id: str, locale: str) -> str:
    operation_id = await stack.admit(account_id)
    await RedisDirectory(stack.redis).add(
        f"login-{account_id}", Account(account_id, f"{account_id}@example.com", locale)
    )
    return operation_id


def hosted_part(
    kind: str, request: tuple[str, str, dict[str, str], bytes]
) -> tuple[str, dict[str, Any]]:
    """(template name, template data) as the request carries them, per provider."""
    method, path, _headers, body = request
    assert method == "POST"
    if kind == "sendgrid":
        sent = orjson.loads(body)
        assert path == "/v3/mail/send" and "content" not in sent and "subject" not in sent
        return sent["template_id"], sent["personalizations"][0]["dynamic_template_data"]
    if kind == "postmark":
        sent = orjson.loads(body)
        assert path == "/email/withTemplate" and "TextBody" not in sent
        assert sent["Metadata"] == {"operation_id": sent["TemplateModel"]["operation_id"]}
        return sent["TemplateAlias"], sent["TemplateModel"]
    assert path == f"/v3/{DOMAIN}/messages"
    fields = _form_fields(body)
    assert "text" not in fields and "html" not in fields
    return fields["template"], orjson.loads(fields["t:variables"])


def _form_fields(body: bytes) -> dict[str, str]:
    if body.startswith(b"--"):  # multipart: name="x"\r\n\r\nvalue
        fields = {}
        for part in body.split(body.split(b"\r\n", 1)[0])[1:-1]:
            head, _, value = part.partition(b"\r\n\r\n")
            name = head.split(b'name="', 1)[1].split(b'"', 1)[0].decode()
            fields[name] = value.removesuffix(b"\r\n").decode()
        return fields
    return {k: v[0] for k, v in parse_qs(body.decode()).items()}


@pytest.mark.parametrize("kind", KINDS)
async def test_the_documented_request_shape_with_the_same_variables(
    kind: str, scripted: Scripted, redis: Redis, redis_server: RedisServer
) -> None:
    scripted.script(success(kind, "m-hosted"))
    stack = Stack(redis, redis_server.url, scripted.url)
    operation_id = await admit(stack, f"acct-shape-{kind}", "fr-CA")
    async with stack.sender(**overrides(kind)):
        await stack.wait_state(operation_id, {State.ACCEPTED})
    [request] = [r for r in scripted.requests if r[0] == "POST"]
    name, data = hosted_part(kind, request)
    assert name == "password-reset-fr"
    assert set(data) == VARIABLES
    assert data["operation_id"] == operation_id and data["locale"] == "fr"
    assert data["link"].startswith("https://game.example/reset-password?operation=" + operation_id)
    # Every attempt names the template (on a loaded machine one may have timed out before
    # its request reached the provider, and the retry sent the one request above).
    rows = await load_attempts(redis, operation_id)
    assert {row.template for row in rows} == {f"{kind}:password-reset-fr"}


@pytest.mark.parametrize("kind", KINDS)
async def test_each_sandbox_accepts_the_shape_and_records_the_template(
    kind: str, redis: Redis, redis_server: RedisServer
) -> None:
    async with run_sandbox(mode=kind, templates="password-reset-en,password-reset-ja") as url:
        stack = Stack(redis, redis_server.url, url)
        operation_id = await admit(stack, f"acct-sandbox-{kind}", "ja-JP")
        async with stack.sender(**overrides(kind)):
            await stack.wait_state(operation_id, {State.ACCEPTED})
        [email] = await sent_emails(url, operation_id=operation_id)
    assert email["email"]["template"] == "password-reset-ja"
    assert set(email["email"]["template_data"]) == VARIABLES


async def test_postmark_answers_a_missing_template_with_1101_and_the_provider_pauses(
    redis: Redis, redis_server: RedisServer
) -> None:
    async with run_sandbox(mode="postmark", templates="password-reset-en") as url:
        stack = Stack(redis, redis_server.url, url)
        operation_id = await admit(stack, "acct-missing-template", "fr")
        async with stack.sender(**overrides("postmark")) as sender:
            await wait_for(lambda: _paused(redis, "postmark"))
            assert not sender.sending_allowed()
            operation = await stack.wait_state(operation_id, {State.QUEUED})
        assert operation.attempts == 0  # the studio's setup, not the player's budget
        assert await sent_emails(url, operation_id=operation_id) == []
    [row] = await load_attempts(redis, operation_id)
    assert (row.outcome, row.http_status, row.decision) == (
        "auth",
        422,
        "requeued; provider paused",
    )
    assert row.template == "postmark:password-reset-fr"


async def test_postmark_sandbox_answer_is_classified_as_template_not_found() -> None:
    async with run_sandbox(mode="postmark", templates="") as url, aiohttp.ClientSession() as s:
        provider = adapter("postmark", s, url)
        message = {
            "from": "a@game.example",
            "to": ["p@example.com"],
            "template": {"name": "nope", "data": {"link": "x"}},
        }
        result = await provider.send("op-1-MISSING", message)
    assert (result.outcome, result.status, result.reason) == (
        Outcome.AUTH,
        422,
        "template_not_found",
    )


@pytest.mark.parametrize("kind", ["sendgrid", "mailgun"])
async def test_sendgrid_and_mailgun_accept_an_unknown_template_as_they_document(
    kind: str, redis: Redis, redis_server: RedisServer
) -> None:
    # sendgrid/sendgrid-go#255 and sargue/mailgun#41: accepted, then dropped by the provider.
    async with run_sandbox(mode=kind, templates="something-else") as url:
        stack = Stack(redis, redis_server.url, url)
        operation_id = await admit(stack, f"acct-unknown-{kind}", "en")
        async with stack.sender(**overrides(kind)):
            await stack.wait_state(operation_id, {State.ACCEPTED})


async def _paused(redis: Redis, name: str) -> bool:
    return name in (await read_control(redis)).auth_paused


def test_the_ses_template_request_is_valid_for_the_sesv2_model() -> None:
    hosted = {"name": "password-reset-fr", "data": {"link": "https://x/?t=1"}}
    message = {"from": "a@game.example", "to": ["p@example.com"], "template": hosted}
    params = ses.request("op-1-SES", message)
    template = {"TemplateName": "password-reset-fr", "TemplateData": '{"link":"https://x/?t=1"}'}
    assert params["Content"] == {"Template": template}
    model = get_session().get_service_model("sesv2").operation_model("SendEmail")
    report = ParamValidator().validate(params, model.input_shape)
    assert not report.has_errors(), report.generate_report()


def test_ses_reports_a_missing_template_as_an_account_level_refusal() -> None:
    error = ClientError(
        {
            "Error": {"Code": "NotFoundException", "Message": "Template x does not exist"},
            "ResponseMetadata": {"HTTPStatusCode": 404},
        },
        "SendEmail",
    )
    assert ses.classify_error(error, templated=True).outcome is Outcome.AUTH
    assert ses.classify_error(error, templated=True).reason == "template_not_found"
    # Without a template, NotFoundException stays what it was (a permanent refusal).
    assert ses.classify_error(error).outcome is Outcome.PERMANENT

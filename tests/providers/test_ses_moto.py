"""Amazon SES v2 through aiobotocore against moto's server mode, started here on a free
loopback port (a real third-party emulator; no home-made SES stand-in).

moto 5.2's known limits, designed around: SESv2 GetAccount is not implemented (404), so
the account's maximum send rate comes from v1 GetSendQuota (1 send/s); message tags are
dropped, so tests count sends with GetSendQuota's SentLast24Hours instead.
Error codes: https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_SendEmail.html and
https://docs.aws.amazon.com/ses/latest/APIReference-V2/CommonErrors.html
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest
from aiobotocore.session import get_session
from botocore.exceptions import ClientError
from redis.asyncio import Redis

from services.ctl.embedded import RedisServer, free_port
from services.sender.app import Opened, build_sender
from shared import clock, codec, control
from shared.control import read as read_control
from shared.model import Outcome, State
from shared.operations import load_operation
from shared.providers.registry import build
from shared.providers.ses import ERROR_CODES, SesProvider, classify_error
from shared.quota import QUOTA_EXCEEDED
from tests.providers.moto_patient import TIMEOUTS, moto
from tests.sender.conftest import Stack, configured_providers, wait_for

REGION = "eu-west-1"
MESSAGE = {
    "from": "Recovery <no-reply@game.example>",
    "to": ["p@example.com"],
    "subject": "Reset",
    "text": "link",
    "html": "<a>link</a>",
}


@pytest.fixture(scope="module")
def aws_env() -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
        }
    )
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE"):
        os.environ.pop(name, None)
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture(scope="module")
def moto_server(aws_env: None) -> Iterator[str]:
    with moto() as url:
        yield url


@pytest.fixture
def moto_checking_credentials(aws_env: None) -> Iterator[str]:
    """moto enforcing IAM from the first call: our "testing" key is unknown to it."""
    with moto(INITIAL_NO_AUTH_ACTION_COUNT="0") as url:
        yield url


@pytest.fixture
async def moto_url(moto_server: str) -> str:
    # Every test starts from an empty SES.
    async with aiohttp.ClientSession() as session, session.post(moto_server + "/moto-api/reset"):
        pass
    return moto_server


@pytest.fixture
async def ses(moto_url: str) -> AsyncIterator[SesProvider]:
    provider = SesProvider(REGION, moto_url, **TIMEOUTS)
    yield provider
    await provider.aclose()


async def _v1(moto_url: str, call: str, **kwargs: str) -> dict[str, object]:
    async with get_session().create_client(
        "ses", region_name=REGION, endpoint_url=moto_url
    ) as client:
        result: dict[str, object] = await getattr(client, call)(**kwargs)
        return result


async def test_an_unverified_sender_pauses_ses_and_resume_delivers(
    redis: Redis, redis_server: RedisServer, moto_url: str
) -> None:
    """moto answers MessageRejected "Email address is not verified" as SES does: every
    send from that identity fails alike, so SES pauses (kind account, SES's words, no
    address) instead of failing every reset; once verified and resumed, it is delivered."""
    stack = Stack(redis, redis_server.url, moto_url)
    operation_id = await stack.admit("acct-ses-unverified")
    ses = SesProvider(REGION, moto_url, **TIMEOUTS)
    try:
        async with stack.sender(ses, provider_kind="ses", provider_name="ses") as sender:
            await wait_for(lambda: _paused(redis), timeout=30)
            note = (await read_control(redis)).auth_paused["ses"]
            assert note["kind"] == "account" and "not verified" in str(note["reason"])
            assert "@" not in str(note["reason"])
            operation = await stack.wait_state(operation_id, {State.QUEUED})
            assert operation.attempts == 0 and not sender.sending_allowed()
            await _v1(moto_url, "verify_domain_identity", Domain="game.example")
            await control.auth_resume(redis, "ses")
            operation = await stack.wait_state(operation_id, {State.ACCEPTED})
    finally:
        await ses.aclose()
    assert (await _v1(moto_url, "get_send_quota"))["SentLast24Hours"] == 1


@pytest.mark.parametrize(
    ("code", "words"),
    [
        ("RequestExpired", "Request has expired."),
        (
            "MessageRejected",
            "Email address is not verified. The following identities failed "
            "the check in region EU-WEST-1: no-reply@game.example",
        ),
    ],
)
def test_account_level_ses_errors_pause_with_ses_words(code: str, words: str) -> None:
    """CommonErrors.html: RequestExpired (the request reached AWS more than 15 minutes
    after its date: our clock); API_SendEmail.html: MessageRejected for an identity."""
    error = ClientError(
        {"Error": {"Code": code, "Message": words}, "ResponseMetadata": {"HTTPStatusCode": 400}},
        "SendEmail",
    )
    result = classify_error(error)
    assert (result.outcome, result.pause, result.detail) == (Outcome.AUTH, "account", words)


def test_other_message_rejections_stay_permanent() -> None:
    error = ClientError(
        {
            "Error": {"Code": "MessageRejected", "Message": "Illegal header"},
            "ResponseMetadata": {"HTTPStatusCode": 400},
        },
        "SendEmail",
    )
    assert classify_error(error).outcome is Outcome.PERMANENT


async def test_send_is_accepted_with_the_ses_message_id(ses: SesProvider, moto_url: str) -> None:
    await _v1(moto_url, "verify_domain_identity", Domain="game.example")
    result = await ses.send("op-1-SES", MESSAGE)
    assert result.outcome is Outcome.ACCEPTED and result.message_id
    quota = await _v1(moto_url, "get_send_quota")
    assert quota["SentLast24Hours"] == 1


async def test_account_rate_caps_the_pacing_ceiling(
    ses: SesProvider, redis: Redis, redis_server: RedisServer, moto_url: str
) -> None:
    rate = await ses.max_send_rate()  # v2 GetAccount 404 on moto -> v1 GetSendQuota
    assert rate == 1.0
    stack = Stack(redis, redis_server.url, moto_url)
    settings = stack.settings(provider_kind="ses", provider_max_rate=50, provider_min_rate=5)
    [configured] = configured_providers(settings)
    async with aiohttp.ClientSession() as session:
        sender = build_sender(settings, redis, session, [Opened(configured, ses, rate)])
    assert (sender.runner.pacer.ceiling, sender.runner.pacer.floor) == (1.0, 1.0)


async def test_sender_delivers_through_ses_on_moto(
    redis: Redis, redis_server: RedisServer, moto_url: str
) -> None:
    await _v1(moto_url, "verify_domain_identity", Domain="game.example")
    stack = Stack(redis, redis_server.url, moto_url)
    operation_id = await stack.admit("acct-ses")
    ses = SesProvider(REGION, moto_url, **TIMEOUTS)
    async with stack.sender(ses, provider_kind="ses", provider_name="ses"):
        operation = await stack.wait_state(operation_id, {State.ACCEPTED})
    await ses.aclose()
    assert operation.provider_message_id
    assert (await _v1(moto_url, "get_send_quota"))["SentLast24Hours"] == 1


async def test_rejected_credentials_pause_the_provider(
    redis: Redis, redis_server: RedisServer, moto_checking_credentials: str
) -> None:
    url = moto_checking_credentials
    ses = SesProvider(REGION, url, **TIMEOUTS)
    stack = Stack(redis, redis_server.url, url)
    operation_id = await stack.admit("acct-ses-key")
    try:
        # moto loads its IAM backend on the first checked call: allow a slow first answer.
        async with stack.sender(
            ses,
            provider_kind="ses",
            provider_name="ses",
            lease_seconds=60,
            total_timeout_seconds=20,
        ) as sender:
            await wait_for(lambda: _paused(redis), timeout=60)
            assert not sender.sending_allowed()
            operation = await stack.wait_state(operation_id, {State.QUEUED})
    finally:
        await ses.aclose()
    assert operation.attempts == 0 and operation.last_status == 403


async def _paused(redis: Redis) -> bool:
    return "ses" in (await read_control(redis)).auth_paused


async def test_a_refused_connection_is_safe_to_retry(aws_env: None) -> None:
    provider = SesProvider(REGION, f"http://127.0.0.1:{free_port()}", connect_timeout=1)
    try:
        result = await provider.send("op-1-SES", MESSAGE)
    finally:
        await provider.aclose()
    assert result.outcome is Outcome.TRANSIENT and result.reason.startswith("not_sent:")


@pytest.mark.parametrize("code", sorted(ERROR_CODES))
def test_every_documented_error_code_is_classified(code: str) -> None:
    error = ClientError(
        {"Error": {"Code": code, "Message": "x"}, "ResponseMetadata": {"HTTPStatusCode": 400}},
        "SendEmail",
    )
    assert classify_error(error).outcome is ERROR_CODES[code]


def test_sending_paused_pauses_the_provider() -> None:
    error = ClientError(
        {
            "Error": {"Code": "SendingPausedException", "Message": "x"},
            "ResponseMetadata": {"HTTPStatusCode": 400},
        },
        "SendEmail",
    )
    assert classify_error(error).outcome is Outcome.AUTH


async def test_every_send_names_the_configuration_set(moto_url: str) -> None:
    """RESETGATE_SES_CONFIGURATION_SET reaches SES as ConfigurationSetName (SES publishes
    events only through one: docs.aws.amazon.com/ses/latest/dg/using-configuration-sets.html);
    moto accepts the call, and the request botocore signed carries it."""
    await _v1(moto_url, "verify_domain_identity", Domain="game.example")
    sent: list[bytes] = []
    ses = SesProvider(REGION, moto_url, **TIMEOUTS, configuration_set="resetgate-events")
    bare = SesProvider(REGION, moto_url, **TIMEOUTS)
    try:
        for provider in (ses, bare):
            client = await provider._client("sesv2")
            client.meta.events.register(
                "before-send.sesv2.SendEmail", lambda request, **_: sent.append(request.body)
            )
            result = await provider.send("op-1-SESCONF", MESSAGE)
            assert result.outcome is Outcome.ACCEPTED
    finally:
        await ses.aclose()
        await bare.aclose()
    with_set, without = (codec.loads(body) for body in sent)
    assert with_set["ConfigurationSetName"] == "resetgate-events"
    assert "ConfigurationSetName" not in without


def test_the_poller_warns_when_the_ses_queue_has_no_configuration_set(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from services.poller.app import build_poller
    from tests.poller.conftest import poller_settings

    settings = poller_settings(
        "redis://127.0.0.1:1", "http://127.0.0.1:1", ses_queue_url="http://127.0.0.1:1/queue/events"
    )
    with caplog.at_level("WARNING"):
        asyncio.run(_build(build_poller, settings))
    assert "RESETGATE_SES_CONFIGURATION_SET" in caplog.text
    caplog.clear()
    monkeypatch.setenv("RESETGATE_SES_CONFIGURATION_SET", "resetgate-events")
    with caplog.at_level("WARNING"):
        asyncio.run(_build(build_poller, settings))
    assert "RESETGATE_SES_CONFIGURATION_SET" not in caplog.text


async def _build(build_poller: Any, settings: Any) -> None:
    redis = Redis.from_url("redis://127.0.0.1:1")  # never connected: building reads nothing
    configured = configured_providers(settings)
    async with aiohttp.ClientSession() as session:
        build_poller(settings, redis, [build(c, session) for c in configured], configured)
    await redis.aclose()


async def test_a_daily_quota_below_n_waits_for_the_window_then_sends_the_rest(
    redis: Redis, redis_server: RedisServer, moto_url: str
) -> None:
    """Five resets against a quota of three per (shortened) window: three are sent, the
    provider pauses until the window rolls over (the rest wait queued, never exhausted),
    then the two others are sent. moto reports Max24HourSend but never enforces it; the
    senders count it themselves (shared/quota.py), so the quota here is the configured
    RESETGATE_PROVIDER_DAILY_QUOTA and the window RESETGATE_QUOTA_WINDOW_SECONDS."""
    await _v1(moto_url, "verify_domain_identity", Domain="game.example")
    stack = Stack(redis, redis_server.url, moto_url)
    ops = [await stack.admit(f"acct-quota-{i}") for i in range(5)]
    ses = SesProvider(REGION, moto_url, **TIMEOUTS)
    try:
        async with stack.sender(
            ses,
            provider_kind="ses",
            provider_name="ses",
            provider_daily_quota=3,
            quota_window_seconds=4,
        ):
            pause = await wait_for(lambda: _quota_pause(redis), timeout=30)
            assert pause["until"] > pause["since"]
            states = await wait_for(lambda: _states_when_three_sent(redis, ops), timeout=10)
            assert states == ["accepted"] * 3 + ["queued"] * 2
            # Still waiting for the window, unless a loaded machine got here after it ended.
            assert await _quota_pause(redis) or clock.now_ms() >= int(str(pause["until"]))
            for op in ops:
                done = await stack.wait_state(op, {State.ACCEPTED, State.EXHAUSTED}, timeout=30)
                assert done.state is State.ACCEPTED and done.attempts == 1
    finally:
        await ses.aclose()
    assert (await _v1(moto_url, "get_send_quota"))["SentLast24Hours"] == 5
    assert "ses" not in (await read_control(redis)).auth_paused  # lifted by itself


async def _states_when_three_sent(redis: Redis, ops: list[str]) -> list[str] | None:
    states = sorted(str(o.state) for o in [await load_operation(redis, op) for op in ops] if o)
    return states if states.count("accepted") == 3 else None


async def _quota_pause(redis: Redis) -> dict[str, object] | None:
    note = (await read_control(redis)).auth_paused.get("ses")
    return note if note and note.get("kind") == "quota" else None


async def test_the_daily_quota_is_read_from_the_account(ses: SesProvider) -> None:
    assert await ses.daily_quota() == 200.0  # moto's Max24HourSend


def test_daily_message_quota_exceeded_is_a_quota_not_a_rate() -> None:
    error = ClientError(
        {
            "Error": {"Code": "Throttling", "Message": "Daily message quota exceeded"},
            "ResponseMetadata": {"HTTPStatusCode": 400},
        },
        "SendEmail",
    )
    assert classify_error(error).reason == QUOTA_EXCEEDED

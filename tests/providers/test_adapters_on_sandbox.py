"""Each adapter against the sandbox speaking that provider (RESETGATE_SANDBOX_MODE), and
the sender end to end. The sandbox's shapes come from the pages named in
services/sandbox/dialects/*.py: SendGrid Mail Send
(https://www.twilio.com/docs/sendgrid/api-reference/mail-send/mail-send), Postmark Email
API (https://postmarkapp.com/developer/api/email-api) and Messages API
(https://postmarkapp.com/developer/api/messages-api), Mailgun Messages and Events
(https://documentation.mailgun.com/docs/mailgun/api-reference/send/mailgun/messages,
.../events)."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

import aiohttp
import pytest
from redis.asyncio import Redis

from services.ctl.embedded import RedisServer
from shared.control import read as read_control
from shared.model import Outcome, State
from shared.operations import load_attempts
from shared.retry_after import parse_http_date
from tests.providers.conftest import Scripted
from tests.providers.kinds import DOMAIN, KINDS, adapter, refused, success
from tests.sender.conftest import Stack, wait_for
from tests.support.sandbox import configure, run_sandbox, sandbox_stats, sent_emails

MESSAGE = {
    "from": "Recovery <no-reply@game.example>",
    "to": ["p@example.com"],
    "subject": "Reset",
    "text": "link",
    "html": "<a>link</a>",
}
TOKEN = re.compile(rb"token(?:=|%3D)([A-Za-z0-9_-]+)")
OPERATION = re.compile(rb"op-\d+-[0-9A-Z]{26}")


def overrides(kind: str, **more: object) -> dict[str, object]:
    return {
        "provider_kind": kind,
        "provider_name": kind,
        "mailgun_domain": DOMAIN,
        "reconcile_grace_seconds": 0,
        "mailgun_events_delay_seconds": 0,
        **more,
    }


@pytest.mark.parametrize("kind", KINDS)
async def test_the_operation_id_travels_with_the_message(kind: str) -> None:
    async with run_sandbox(mode=kind) as url, aiohttp.ClientSession() as session:
        result = await adapter(kind, session, url).send("op-3-OPERATION", MESSAGE)
        assert result.outcome is Outcome.ACCEPTED and result.message_id
        emails = await sent_emails(url, operation_id="op-3-OPERATION")
    assert len(emails) == 1
    assert emails[0]["email"]["to"] == ["p@example.com"]
    assert emails[0]["email"]["subject"] == "Reset"


@pytest.mark.parametrize("kind", ["postmark", "mailgun"])
async def test_lookup_finds_the_send_by_operation_id(kind: str) -> None:
    async with run_sandbox(mode=kind) as url, aiohttp.ClientSession() as session:
        provider = adapter(kind, session, url)
        sent = await provider.send("op-3-FOUND", MESSAGE)
        found = await provider.lookup("op-3-FOUND")
        missing = await provider.lookup("op-3-NEVER")
    assert (found.status, found.message_id) == (200, sent.message_id)
    assert (missing.status, missing.message_id) == (200, "")


@pytest.mark.parametrize("kind", KINDS)
async def test_a_wrong_key_pauses_the_provider(
    kind: str, redis: Redis, redis_server: RedisServer
) -> None:
    async with run_sandbox(mode=kind, api_key="the-right-key") as url:
        stack = Stack(redis, redis_server.url, url)
        operation_id = await stack.admit(f"acct-key-{kind}")
        async with stack.sender(**overrides(kind, provider_api_key="a-wrong-key")) as sender:
            await wait_for(lambda: _paused(redis, kind))
            assert not sender.sending_allowed()
            operation = await stack.wait_state(operation_id, {State.QUEUED})
        assert operation.attempts == 0  # our fault: the player's budget is refunded
        stats = await sandbox_stats(url)
        assert stats["emails_sent_total"] == 0 and stats["auth_failures_total"] >= 1


async def _paused(redis: Redis, kind: str) -> bool:
    return kind in (await read_control(redis)).auth_paused


@pytest.mark.parametrize("kind", KINDS)
async def test_every_retry_carries_the_same_operation_id_and_token(
    kind: str, scripted: Scripted, redis: Redis, redis_server: RedisServer
) -> None:
    # Throttles: answers that prove nothing was sent (a 5xx after the write proves nothing,
    # whatever its body: ambiguous, never resent;
    # tests/inbound/test_provider_sandboxes.py).
    scripted.script(refused(kind, 429), refused(kind, 429), success(kind, "m-7"))
    stack = Stack(redis, redis_server.url, scripted.url)
    operation_id = await stack.admit(f"acct-retry-{kind}")
    async with stack.sender(**overrides(kind)):
        operation = await stack.wait_state(operation_id, {State.ACCEPTED})
    assert operation.provider_message_id == "m-7"
    bodies = [r[3] for r in scripted.requests if r[0] == "POST"]
    assert len(bodies) == 3
    assert all(set(OPERATION.findall(b)) == {operation_id.encode()} for b in bodies)
    assert len({TOKEN.search(b).group(1) for b in bodies if TOKEN.search(b)}) == 1
    assert all(TOKEN.search(b) for b in bodies)
    ledger = await load_attempts(redis, operation_id)
    assert [a.outcome for a in ledger] == ["throttled", "throttled", "accepted"]


@pytest.mark.parametrize("kind", KINDS)
async def test_sender_delivers_through_the_provider_mode(
    kind: str, redis: Redis, redis_server: RedisServer
) -> None:
    async with run_sandbox(mode=kind) as url:
        stack = Stack(redis, redis_server.url, url)
        operation_id = await stack.admit(f"acct-deliver-{kind}")
        async with stack.sender(**overrides(kind)):
            operation = await stack.wait_state(operation_id, {State.ACCEPTED})
        emails = await sent_emails(url, operation_id=operation_id)
    assert len(emails) == 1 and operation.provider_message_id


async def test_sendgrid_rate_headers_ride_on_every_answer_and_end_the_period() -> None:
    """SendGrid: "Each Web API response includes rate-limit headers"; once the period's
    requests are used, a 429 until X-RateLimit-Reset, an epoch second
    (https://www.twilio.com/docs/sendgrid/api-reference/how-to-use-the-sendgrid-v3-api/rate-limits).
    """
    async with (
        run_sandbox(mode="sendgrid", send_rate_per_second=2) as url,
        aiohttp.ClientSession() as session,
    ):
        provider = adapter("sendgrid", session, url)
        results = [await provider.send(f"op-3-RATE{i}", MESSAGE) for i in range(3)]
    accepted = [r for r in results if r.outcome is Outcome.ACCEPTED]
    assert accepted and all(r.rate is not None and r.rate.limit == 2 for r in accepted)
    throttled = [r for r in results if r.outcome is Outcome.THROTTLED]
    for result in throttled:  # none when the three straddled a second boundary
        assert result.rate is not None and result.rate.remaining == 0
        reset = result.rate.reset_at
        assert reset is not None and reset == int(reset)


async def test_mailgun_sandbox_states_its_wait_in_the_message_and_the_adapter_reads_it() -> None:
    """The Mailgun mode throttles as Mailgun words it ("… try again after <date>",
    github.com/mailgun/mailgun-java/issues/50), and the adapter trusts that text first."""
    async with (
        run_sandbox(mode="mailgun", send_rate_per_second=0.2, send_burst=1) as url,
        aiohttp.ClientSession() as session,
    ):
        provider = adapter("mailgun", session, url)
        first = await provider.send("op-3-FIRST", MESSAGE)
        second = await provider.send("op-3-SECOND", MESSAGE)
    assert first.outcome is Outcome.ACCEPTED
    assert (second.outcome, second.retry_source) == (Outcome.THROTTLED, "message")
    stated = parse_http_date(second.retry_after or "", datetime.now(UTC))
    assert stated is not None and 0 <= stated.timestamp() - time.time() <= 7


async def test_mailgun_events_ignore_the_undocumented_user_variables_filter() -> None:
    """documentation.mailgun.com/docs/mailgun/api-reference/send/mailgun/events names its
    filter fields; ``user-variables`` is not one. The sandbox ignores it, so the lookup's
    page holds other sends: the adapter still only ever reports one that is ours."""
    async with run_sandbox(mode="mailgun") as url, aiohttp.ClientSession() as session:
        provider = adapter("mailgun", session, url)
        sent = [await provider.send(f"op-3-MG{i:02d}", MESSAGE) for i in range(12)]
        first = await provider.lookup("op-3-MG00")
        last = await provider.lookup("op-3-MG11")  # past the page of 10 the lookup asks for
    assert first.message_id == sent[0].message_id
    assert last.message_id == ""  # "not found" here proves nothing: the lookup is found-only


async def test_postmark_search_has_a_configurable_indexing_delay() -> None:
    """Postmark documents no delay after which the outbound search
    (postmarkapp.com/developer/api/messages-api) shows a send; the sandbox's is settable."""
    async with (
        run_sandbox(mode="postmark", search_delay_seconds=30) as url,
        aiohttp.ClientSession() as session,
    ):
        provider = adapter("postmark", session, url)
        sent = await provider.send("op-3-PMDELAY", MESSAGE)
        early = await provider.lookup("op-3-PMDELAY")
        await configure(url, search_delay_seconds=0)
        later = await provider.lookup("op-3-PMDELAY")
    assert (early.message_id, later.message_id) == ("", sent.message_id)

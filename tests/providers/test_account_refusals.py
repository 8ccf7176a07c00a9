"""Documented answers that refuse the whole account or domain pause the provider, as a
rejected key does: no operation fails, each waits queued with its attempt refunded, the
pause carries the provider's own words, and after ``resetgate ops provider-resume`` (the
real CLI) every operation is delivered once.

The sandbox answers each refusal as its provider words it (services/sandbox/dialects/):
Mailgun's 400 "Domain … is not allowed to send", "Please activate your Mailgun account",
"Free accounts are for test purposes only", 404 "Domain not found: …" and a 404 without JSON
("a non-existing endpoint": a base URL ending in /v3)
(documentation.mailgun.com/docs/mailgun/quickstart-guide/responses); Postmark's 403 without
an ErrorCode, from its network layer, and its 404 "ensure the endpoint … are correct"
(postmarkapp.com/developer/api/overview), its 422 ErrorCode 300 "Invalid 'From' address: …
is not a verified sender signature"
(postmarkapp.com/support/article/troubleshooting-422-unprocessable-entity-errors); SendGrid's
403 for an unverified Sender Identity
(twilio.com/docs/sendgrid/api-reference/how-to-use-the-sendgrid-v3-api/responses). One per
provider kind again on real processes, SES's through moto: test_account_refusals_processes.py.
"""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from services.ctl.embedded import RedisServer
from shared.control import read as read_control
from shared.model import State
from tests.ctl.test_ops import ops
from tests.providers.test_adapters_on_sandbox import overrides
from tests.sender.conftest import Stack, wait_for
from tests.support.sandbox import configure, run_sandbox, sandbox_stats

REFUSALS = [
    ("mailgun", "domain_not_allowed", "is not allowed to send"),
    ("mailgun", "account_not_activated", "Please activate your Mailgun account"),
    ("mailgun", "free_account", "Free accounts are for test purposes only"),
    ("mailgun", "domain_not_found", "Domain not found"),
    ("mailgun", "wrong_base_url", "base URL"),
    ("postmark", "forbidden", "Forbidden"),
    ("postmark", "from_not_signature", "not a verified sender signature"),
    ("postmark", "not_found", "ensure the endpoint"),
    ("sendgrid", "sender_not_verified", "verified Sender Identity"),
]
N = 3


@pytest.mark.parametrize(("kind", "refusal", "words"), REFUSALS)
async def test_an_account_refusal_pauses_the_provider_and_resume_delivers_every_operation(
    kind: str, refusal: str, words: str, redis: Redis, redis_server: RedisServer
) -> None:
    async with run_sandbox(mode=kind, refusal=refusal) as url:
        stack = Stack(redis, redis_server.url, url)
        ops_ids = [await stack.admit(f"acct-{refusal}-{i}") for i in range(N)]
        async with stack.sender(**overrides(kind)) as sender:
            note = await wait_for(lambda: _pause(redis, kind))
            assert note["kind"] == "account" and words in note["reason"], note
            assert not sender.sending_allowed()
            waiting = [await stack.wait_state(op, {State.QUEUED}) for op in ops_ids]
            assert all(op.attempts == 0 for op in waiting)  # the player's budget is refunded
            assert (await sandbox_stats(url))["emails_sent_total"] == 0
            await configure(url, refusal="")  # the account is fixed
            resumed = await asyncio.to_thread(
                ops, redis_server, "provider-resume", "--provider", kind
            )
            assert resumed.returncode == 0 and "account pause lifted" in resumed.stdout
            done = [
                await stack.wait_state(
                    op, {State.ACCEPTED, State.FAILED, State.EXHAUSTED}, timeout=30
                )
                for op in ops_ids
            ]
        stats = await sandbox_stats(url)
    assert [d.state for d in done] == [State.ACCEPTED] * N
    assert stats["emails_sent_total"] == N and stats["refused_total"] >= 1


async def _pause(redis: Redis, kind: str) -> dict[str, object] | None:
    return (await read_control(redis)).auth_paused.get(kind)

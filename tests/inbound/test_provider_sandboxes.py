"""End to end through each provider's own sandbox: admission -> sender -> the sandbox speaking
SendGrid's, Mailgun's or Postmark's API -> the events that provider pushes, signed as it signs
them, POSTed by the sandbox to the poller's webhook port -> the store -> support's view.

Nothing here writes an event by hand: the sandbox emits them (services/sandbox/webhooks.py)
after accepting the send, shaped after the provider's pages —
SendGrid twilio.com/docs/sendgrid/for-developers/tracking-events/event and
.../getting-started-event-webhook-security-features, its key from
api-reference/webhooks/get-signed-event-webhooks-public-key; Mailgun documentation.mailgun.com/
docs/mailgun/user-manual/webhooks/securing-webhooks and .../user-manual/events/; Postmark
postmarkapp.com/developer/webhooks/delivery-webhook and /bounce-webhook, credentials in the URL
as /webhooks-overview shows. The sandbox's pull feed is not read by these providers' adapters,
so delivery can only have come by webhook. SES has no sandbox mode: moto's SES does not publish
configuration-set events, so its SNS -> SQS path is tested with moto (test_e2e_providers.py).

A 5xx after the send was written, from SendGrid, Postmark or Mailgun (no idempotency key):
one email, never a blind resend. The sandbox records the email and then answers
(``late_error_every``) either 502 with a gateway's page — what a load balancer in front of the
provider answers when the provider took the message and the answer was lost — or the
provider's own documented error body with a 500 or a 408 (``late_error_shape`` "provider":
SendGrid's ``{"errors": [{"message"}]}`` on
twilio.com/docs/sendgrid/api-reference/how-to-use-the-sendgrid-v3-api/errors, Postmark's
``{"ErrorCode", "Message"}`` on postmarkapp.com/developer/api/overview, Mailgun's
``{"message"}`` on documentation.mailgun.com/docs/mailgun/quickstart-guide/responses). None of
those pages says such an answer means the mail was not taken, so after the body was written it
proves nothing: no blind resend, whatever the body says. The attempt is ambiguous and is
settled as the capabilities allow: SendGrid by its ``processed`` webhook, Mailgun by its
``accepted`` webhook or its found-only lookup, Postmark by its found-only search.

One stack per provider serves both: each test sets the sandbox's answer it needs on the
running sandbox (``/_sandbox/config``) before its example, as a stack per (provider, test,
answer) cost a dozen more stacks of processes.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from services.ctl.embedded import RedisServer
from shared.keys import PartitionKeys
from tests.e2e.conftest import E2E, poll, pushed_events_stack
from tests.support.sandbox import configure, sandbox_stats

PROVIDERS = ("sendgrid", "mailgun", "postmark")
BOUNCE_DOMAIN = "bounce.example"
# What answers after the provider took the mail: (shape, status).
ANSWERS = {
    "gateway-502": ("gateway", 502),
    "provider-500": ("provider", 500),
    "provider-408": ("provider", 408),
}
SETTLED = {"accepted", "exhausted", "review", "failed"}


@dataclass
class Stack:
    provider: str
    e2e: E2E
    sandbox_url: str


@pytest.fixture(scope="module")
def sandbox_redis() -> Iterator[RedisServer]:
    # These providers have no idempotency key: the sender requires appendfsync always.
    server = RedisServer(appendonly=True, appendfsync="always").start()
    yield server
    server.stop()


@pytest.fixture(scope="module", params=PROVIDERS)
async def stack(request: Any, sandbox_redis: RedisServer) -> AsyncIterator[Stack]:
    provider = str(request.param)
    logs = Path(tempfile.mkdtemp(prefix=f"rg-hooks-{provider}-"))
    sandbox = {"delivered_delay_seconds": 0.5, "bounce_domain": BOUNCE_DOMAIN}
    async with pushed_events_stack(
        sandbox_redis.url, provider, logs, sandbox, RESETGATE_MAILGUN_EVENTS_DELAY_SECONDS="1"
    ) as e2e:
        yield Stack(provider, e2e, e2e.provider_url)


async def test_delivered_and_bounced_arrive_by_the_providers_own_webhook(stack: Stack) -> None:
    e2e, provider = stack.e2e, stack.provider
    await configure(stack.sandbox_url, late_error_every=0)  # every send answered as sent
    posted_before = (await sandbox_stats(stack.sandbox_url))["webhooks"]["posted"]
    delivered_account, bounced_account = f"hook-{provider}-ok", f"hook-{provider}-bounce"
    await e2e.account(delivered_account)
    await e2e.account(bounced_account, domain=BOUNCE_DOMAIN)
    delivered = await e2e.admit(delivered_account)
    bounced = await e2e.admit(bounced_account)
    view = await e2e.until(delivered, lambda v: v["delivery"] == "delivered", timeout=30)
    assert view["state"] == "accepted" and view["delivery_observed_at"], view
    view = await e2e.until(bounced, lambda v: v["delivery"] == "bounced", timeout=30)
    assert view["state"] == "accepted", "delivery is kept apart from acceptance"
    # The sandbox counts a POST once the poller has answered it, and the poller answers after
    # writing the event: the view can show the bounce before the sandbox has counted its POST.
    hooks = await poll(lambda: _posted(stack.sandbox_url, posted_before + 2), timeout=30)
    assert hooks["refused"] == hooks["failed"] == 0, hooks
    poller = e2e["poller"]
    refused = await poller.metric(
        "resetgate_webhook_requests_total", provider=provider, status="401"
    )
    assert refused == 0
    assert f"@{BOUNCE_DOMAIN}" not in poller.logs() and "@example.com" not in poller.logs()
    # The sender keeps the message id as the events name it: Mailgun's without "@domain".
    ids = [
        await e2e.redis.hget(PartitionKeys.of(op).operation(op), "provider_message_id")
        for op in (delivered, bounced)
    ]
    assert all(ids) and not any("@" in str(i) for i in ids), ids


async def _posted(sandbox_url: str, at_least: int) -> dict[str, Any] | None:
    hooks = dict((await sandbox_stats(sandbox_url))["webhooks"])
    return hooks if hooks["posted"] >= at_least else None


@pytest.mark.parametrize("answer", ANSWERS)
async def test_a_5xx_after_the_write_sends_one_email_and_is_settled_accepted(
    stack: Stack, answer: str
) -> None:
    e2e, provider = stack.e2e, stack.provider
    shape, status = ANSWERS[answer]
    await configure(
        e2e.provider_url, late_error_every=1, late_error_shape=shape, late_error_status=status
    )
    try:
        late_before = (await sandbox_stats(e2e.provider_url))["late_errors_total"]
        account = f"late-5xx-{provider}-{answer}"
        await e2e.account(account)
        op = await e2e.admit(account)
        view = await e2e.until(op, lambda v: v["state"] in SETTLED, timeout=45)
        await asyncio.sleep(1.5)  # a retry, if one were coming, has had its backoff (0.5 s cap)
        stats = await sandbox_stats(e2e.provider_url, operation_id=op)
    finally:
        await configure(e2e.provider_url, late_error_every=0)
    assert stats["late_errors_total"] > late_before, stats
    assert stats["sent_by_operation"][op] == 1, (view, stats["sent_by_operation"])
    assert view["state"] == "accepted", view

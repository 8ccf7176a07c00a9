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
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from services.ctl.embedded import RedisServer
from shared.keys import PartitionKeys
from tests.e2e.conftest import E2E, poll, pushed_events_stack
from tests.support.sandbox import sandbox_stats

PROVIDERS = ("sendgrid", "mailgun", "postmark")
BOUNCE_DOMAIN = "bounce.example"


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
    async with pushed_events_stack(sandbox_redis.url, provider, logs, sandbox) as e2e:
        yield Stack(provider, e2e, e2e.provider_url)


async def test_delivered_and_bounced_arrive_by_the_providers_own_webhook(stack: Stack) -> None:
    e2e, provider = stack.e2e, stack.provider
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
    hooks = await poll(lambda: _posted(stack.sandbox_url, 2), timeout=30)
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

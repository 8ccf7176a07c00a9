"""Each provider mode of the sandbox pushes its delivery events as that provider does
(services/sandbox/webhooks.py): what arrives at the receiver verifies with the poller's own
checks and parses to the events that happened. The pages each shape follows: SendGrid
twilio.com/docs/sendgrid/for-developers/tracking-events/event and
.../getting-started-event-webhook-security-features (key from api-reference/webhooks/
get-signed-event-webhooks-public-key); Mailgun documentation.mailgun.com/docs/mailgun/
user-manual/webhooks/securing-webhooks and .../user-manual/events/; Postmark
postmarkapp.com/developer/webhooks/delivery-webhook, /bounce-webhook, /webhooks-overview.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import aiohttp
import pytest
from aiohttp import web

from services.poller.inbound import mailgun, postmark, sendgrid
from services.poller.inbound.events import Acceptance, Parsed
from shared.model import Delivery
from shared.providers.sendgrid import public_key
from tests.e2e.conftest import poll
from tests.providers.kinds import KINDS, adapter
from tests.support.sandbox import SANDBOX_API_KEY, run_sandbox, sandbox_stats
from tests.support.webhooks import hook_receiver

MESSAGE = {
    "from": "no-reply@game.example",
    "to": ["p@bounce.example"],
    "subject": "Reset",
    "text": "link",
    "html": "",
}
KEY = "mailgun-signing-key-for-the-sandbox"
USER, PASSWORD = "hooks", "hook-password-0123"
SCALE = 0.001  # Mailgun's first retry, 5 minutes after the failure, in 0.3 s


@dataclass
class Receiver:
    url: str = ""
    statuses: list[int] = field(default_factory=list)  # answered in turn; then 200
    posts: list[tuple[dict[str, str], bytes]] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.Response:
        self.posts.append((dict(request.headers), await request.read()))
        return web.Response(status=self.statuses.pop(0) if self.statuses else 200)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    state = Receiver()
    async with hook_receiver(state.handle, f"{USER}:{PASSWORD}") as url:
        state.url = url
        yield state


async def verified(kind: str, sandbox_url: str, headers: dict[str, str], body: bytes) -> Parsed:
    """The poller's own checks on one POST (each raises on a bad signature or credential)."""
    if kind == "sendgrid":
        async with (
            aiohttp.ClientSession() as session,
            session.get(
                f"{sandbox_url}/v3/user/webhooks/event/settings/signed/any",
                headers={"Authorization": f"Bearer {SANDBOX_API_KEY}"},
            ) as answer,
        ):
            key = public_key((await answer.json())["public_key"])
        sendgrid.verify(
            key,
            headers.get(sendgrid.SIGNATURE_HEADER),
            headers.get(sendgrid.TIMESTAMP_HEADER),
            body,
        )
        return sendgrid.parse(body)
    if kind == "mailgun":
        signed = mailgun.decode(body)
        mailgun.verify(KEY.encode(), signed)
        return mailgun.parse(signed.event)
    postmark.check_credentials(headers.get("Authorization"), f"{USER}:{PASSWORD}".encode())
    return postmark.parse(body)


@pytest.mark.parametrize("kind", KINDS)
async def test_events_are_pushed_signed_as_the_provider_signs_them(
    kind: str, receiver: Receiver
) -> None:
    settings = {
        "mode": kind,
        "webhook_url": receiver.url,
        "webhook_signing_key": KEY,
        "delivered_delay_seconds": 0.05,
        "bounce_domain": "bounce.example",
    }
    expected = [Delivery.BOUNCED] if kind == "postmark" else [Acceptance.ACCEPTED, Delivery.BOUNCED]
    async with run_sandbox(**settings) as url, aiohttp.ClientSession() as session:
        sent = await adapter(kind, session, url).send("op-3-HOOKED", MESSAGE)

        async def arrived() -> bool:
            return len(receiver.posts) >= len(expected)

        await poll(arrived, timeout=10)
        events = [
            ev
            for headers, body in receiver.posts
            for ev in (await verified(kind, url, headers, body)).events
        ]
    assert sorted(str(ev.meaning) for ev in events) == sorted(map(str, expected))
    assert {ev.operation_id for ev in events} == {"op-3-HOOKED"}
    assert sent.message_id.startswith(events[0].message_id), "joined to the send's message id"


async def test_a_failed_post_is_tried_again_and_mailguns_406_is_final(receiver: Receiver) -> None:
    receiver.statuses = [503, 406]
    settings = {
        "mode": "mailgun",
        "webhook_url": receiver.url,
        "webhook_signing_key": KEY,
        "delivered_delay_seconds": 3600,
        "webhook_retry_scale": SCALE,
    }
    async with run_sandbox(**settings) as url, aiohttp.ClientSession() as session:
        await adapter("mailgun", session, url).send("op-3-RETRIED", MESSAGE)

        async def settled() -> dict[str, int] | None:
            hooks: dict[str, int] = (await sandbox_stats(url))["webhooks"]
            return hooks if hooks["refused"] else None

        hooks = await poll(settled, timeout=10)
    assert len(receiver.posts) == 2, "503 is retried; 406 ends it (Mailgun's retry schedule)"
    assert (hooks["retried"], hooks["refused"], hooks["posted"]) == (1, 1, 0)


async def test_mailgun_never_retries_a_delivered_notification(receiver: Receiver) -> None:
    """documentation.mailgun.com/docs/mailgun/user-manual/webhooks/webhook-retries: every
    failed POST is retried "other than for delivery notification": a 503 loses it."""
    receiver.statuses = [200, 503, 200]  # the acceptance lands; the delivery meets a 503
    settings = {
        "mode": "mailgun",
        "webhook_url": receiver.url,
        "webhook_signing_key": KEY,
        "delivered_delay_seconds": 0.1,
        "webhook_retry_scale": SCALE,
    }
    async with run_sandbox(**settings) as url, aiohttp.ClientSession() as session:
        await adapter("mailgun", session, url).send("op-3-DELIVERED", MESSAGE)

        async def settled() -> dict[str, int] | None:
            hooks: dict[str, int] = (await sandbox_stats(url))["webhooks"]
            return hooks if hooks["posted"] + hooks["refused"] >= 2 else None

        hooks = await poll(settled, timeout=10)
        await asyncio.sleep(1.5)  # a retry, if one were made, has come (5 min: 0.3 s)
    assert len(receiver.posts) == 2, "the delivered notification is not retried"
    assert (hooks["retried"], hooks["refused"]) == (0, 1)

"""A provider-mode sandbox wired to the poller's webhook listener, as the provider is wired to
a deployment: the sandbox POSTs its signed events to the poller's webhook port, and the
poller holds the matching credential. Used by tests/inbound/ and the storm benchmark.

    port = free_port()
    async with run_sandbox_process(mode=kind, **sandbox_webhooks(kind, port)) as url:
        poller_env = {"RESETGATE_WEBHOOK_PORT": str(port),
                      **await poller_credentials(kind, url)}

SendGrid signs with a key pair the sandbox makes at start (as SendGrid makes it), so the
poller's verification key is read from the running sandbox through SendGrid's documented
route; Mailgun's signing key and Postmark's basic-auth pair are ours to choose.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
from aiohttp import web

from services.sandbox.dialects import DIALECTS
from tests.support.sandbox import SANDBOX_API_KEY

MAILGUN_KEY = "mailgun-webhook-signing-key-0123"
POSTMARK_USER, POSTMARK_PASSWORD = "postmark-hooks", "postmark-password-0123456789"
# The providers retry a refused webhook for minutes to hours: a test's sandbox retries on
# the same schedule a thousand times faster (Mailgun's first 5 minutes: 0.3 s).
RETRY_SCALE = 0.001


def pushes_events(mode: str) -> bool:
    """Whether the sandbox in this mode pushes webhooks (its provider has them)."""
    dialect = DIALECTS.get(mode)
    return dialect is not None and dialect.hook is not None


def webhook_url(provider: str, port: int) -> str:
    """The poller's route for this provider; Postmark's credentials ride in the URL."""
    auth = f"{POSTMARK_USER}:{POSTMARK_PASSWORD}@" if provider == "postmark" else ""
    return f"http://{auth}127.0.0.1:{port}/webhooks/{provider}"


def sandbox_webhooks(provider: str, port: int) -> dict[str, Any]:
    """The sandbox settings that make it push to a poller listening on ``port``."""
    return {
        "webhook_url": webhook_url(provider, port),
        "webhook_signing_key": MAILGUN_KEY,
        "webhook_retry_scale": RETRY_SCALE,
    }


async def sendgrid_public_key(sandbox_url: str) -> str:
    """The verification key, read as a SendGrid user reads it (the documented API route)."""
    url = f"{sandbox_url}/v3/user/webhooks/event/settings/signed/resetgate"
    headers = {"Authorization": f"Bearer {SANDBOX_API_KEY}"}
    async with aiohttp.ClientSession() as session, session.get(url, headers=headers) as answer:
        assert answer.status == 200, await answer.text()
        return str((await answer.json())["public_key"])


async def poller_credentials(provider: str, sandbox_url: str) -> dict[str, str]:
    """The poller's variables that accept what the sandbox at ``sandbox_url`` signs."""
    if provider == "sendgrid":
        return {"RESETGATE_SENDGRID_WEBHOOK_PUBLIC_KEY": await sendgrid_public_key(sandbox_url)}
    if provider == "mailgun":
        return {"RESETGATE_MAILGUN_WEBHOOK_SIGNING_KEY": MAILGUN_KEY}
    return {
        "RESETGATE_POSTMARK_WEBHOOK_USERNAME": POSTMARK_USER,
        "RESETGATE_POSTMARK_WEBHOOK_PASSWORD": POSTMARK_PASSWORD,
    }


@asynccontextmanager
async def hook_receiver(
    handle: Callable[[web.Request], Awaitable[web.Response]], credentials: str
) -> AsyncIterator[str]:
    """A webhook endpoint on a free port answering with ``handle``; yields its URL with
    ``credentials`` (``user:password``) in it, as Postmark's webhook URLs carry them."""
    app = web.Application()
    app.router.add_post("/hooks", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://{credentials}@127.0.0.1:{runner.addresses[0][1]}/hooks"
    finally:
        await runner.cleanup()

"""A store that cannot be reached: the webhook answers 503 (the provider retries), never a
500 with a traceback, and nothing is half-remembered."""

from __future__ import annotations

import time

import aiohttp
from aiohttp.test_utils import TestServer
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from services.ctl.embedded import free_port
from services.poller.inbound.ingest import Ingest
from services.poller.inbound.webhooks import Webhooks
from services.poller.settings import PollerSettings
from shared import codec
from tests.inbound.providers import SendGridSigner, mailgun_body, sendgrid_event

KEY = "mailgun-key-0123456789abcdef"


async def test_unreachable_store_is_a_503_for_every_provider() -> None:
    signer = SendGridSigner.generate()
    settings = PollerSettings(
        provider_api_key="k",
        partitions=4,
        mailgun_webhook_signing_key=KEY,
        sendgrid_webhook_public_key=signer.public_key,
    )
    down = Redis(
        port=free_port(),
        socket_connect_timeout=0.5,
        socket_timeout=0.5,
        retry=Retry(NoBackoff(), 0),
    )
    webhooks = Webhooks(settings, down, Ingest(down, settings))
    server = TestServer(webhooks.app())
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as session:
            body = mailgun_body(
                KEY, "op-1-01HZZZZZZZZZZZZZZZZZZZZZZZ", "m", "delivered", time.time()
            )
            async with session.post(server.make_url("/webhooks/mailgun"), data=body) as answer:
                assert (answer.status, (await answer.json())["error"]) == (503, "unavailable")
            batch = codec.dumps(
                [sendgrid_event("op-1-01HZZZZZZZZZZZZZZZZZZZZZZZ", "m", "delivered", time.time())]
            )
            async with session.post(
                server.make_url("/webhooks/sendgrid"), data=batch, headers=signer.headers(batch)
            ) as answer:
                assert answer.status == 503
    finally:
        await server.close()
        await down.aclose()

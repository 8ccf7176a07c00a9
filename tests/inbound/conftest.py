"""The stack for pushed events, as real processes: redis-server, the http sandbox, moto in
server mode, admission, sender and a poller with its webhook listener and SES queue reader.

The operation is created through admission and accepted by the sender against the sandbox
(the default ``http`` adapter); the provider-shaped event is then delivered the way the
provider delivers it: signed and POSTed to the webhook port, or published on the SNS topic
that moto fans out to the SQS queue. The sandbox's own feed is kept silent (its delivered
event is an hour away), so whatever the operation shows came from the pushed event.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from redis.asyncio import Redis

from services.ctl.embedded import RedisServer, free_port
from tests.e2e.conftest import BASELINE, E2E, POLLER_ENV, SENDER_ENV, service_env
from tests.inbound.providers import SendGridSigner
from tests.support.moto_server import AWS_ENV, moto_server, ses_event_queue
from tests.support.processes import Processes, ServiceProcess
from tests.support.sandbox import run_sandbox_process
from tests.support.webhooks import MAILGUN_KEY, POSTMARK_PASSWORD, POSTMARK_USER

MAX_BODY = 65536


@dataclass(frozen=True)
class Aws:
    endpoint: str
    topic_arn: str
    queue_url: str
    dead_letter_url: str


class Inbound(E2E):
    """The e2e handles plus what a provider needs to reach the poller."""

    def __init__(
        self,
        processes: Processes,
        redis: Redis,
        provider_url: str,
        *,
        webhook_url: str,
        signer: SendGridSigner,
        aws: Aws,
    ) -> None:
        super().__init__(processes, redis, provider_url)
        self.webhook_url = webhook_url
        self.signer = signer
        self.aws = aws

    async def post(
        self,
        provider: str,
        body: bytes,
        headers: dict[str, str],
        poller: ServiceProcess | None = None,
    ) -> tuple[int, Any]:
        """POSTed to the package's poller, or to ``poller``'s webhook listener."""
        base = webhook_url(poller) if poller is not None else self.webhook_url
        url = f"{base}/webhooks/{provider}"
        async with (
            aiohttp.ClientSession() as session,
            session.post(url, data=body, headers=headers) as response,
        ):
            return response.status, await response.json(content_type=None)

    async def accepted(self, account_id: str) -> tuple[str, str]:
        """A fresh operation, admitted and accepted: (operation id, provider message id)."""
        await self.account(account_id)
        op = await self.admit(account_id)
        view = await self.until(op, lambda v: v["state"] == "accepted")
        return op, str(view["provider_message_id"])


def webhook_url(poller: ServiceProcess) -> str:
    return f"http://127.0.0.1:{poller.env['RESETGATE_WEBHOOK_PORT']}"


@pytest.fixture(scope="package")
def inbound_redis() -> Iterator[RedisServer]:
    server = RedisServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="package")
async def inbound(inbound_redis: RedisServer) -> AsyncIterator[Inbound]:
    logs = Path(tempfile.mkdtemp(prefix="rg-inbound-"))
    redis = Redis.from_url(inbound_redis.url, decode_responses=True)
    signer = SendGridSigner.generate()
    sandbox = {**BASELINE, "delivered_delay_seconds": 3600}
    async with run_sandbox_process(**sandbox) as provider_url, moto_server(logs) as aws:
        topic, queue, dead = await ses_event_queue(aws)
        base = {
            **service_env(inbound_redis.url, provider_url),
            "RESETGATE_OBSERVATION_WINDOW_SECONDS": "600",
        }
        webhook_port = free_port()
        async with Processes(logs, base) as processes:
            processes.add("admission")
            processes.add("sender", **SENDER_ENV)
            processes.add(
                "poller",
                **POLLER_ENV,
                **AWS_ENV,
                **{
                    "RESETGATE_WEBHOOK_PORT": str(webhook_port),
                    "RESETGATE_WEBHOOK_MAX_BODY_BYTES": str(MAX_BODY),
                    "RESETGATE_SENDGRID_WEBHOOK_PUBLIC_KEY": signer.public_key,
                    "RESETGATE_MAILGUN_WEBHOOK_SIGNING_KEY": MAILGUN_KEY,
                    "RESETGATE_POSTMARK_WEBHOOK_USERNAME": POSTMARK_USER,
                    "RESETGATE_POSTMARK_WEBHOOK_PASSWORD": POSTMARK_PASSWORD,
                    "RESETGATE_POSTMARK_WEBHOOK_NETWORKS": "127.0.0.0/8",
                    "RESETGATE_SES_QUEUE_URL": queue,
                    "RESETGATE_SES_DEAD_LETTER_QUEUE_URL": dead,
                    "RESETGATE_SES_WAIT_SECONDS": "2",
                    "RESETGATE_AWS_ENDPOINT_URL": aws,
                    "RESETGATE_LOG_LEVEL": "DEBUG",  # debug lines must be clean too
                },
            )
            await asyncio.gather(*(processes.start(n) for n in processes.services))
            yield Inbound(
                processes,
                redis,
                provider_url,
                webhook_url=webhook_url(processes["poller"]),
                signer=signer,
                aws=Aws(aws, topic, queue, dead),
            )
    await redis.aclose()

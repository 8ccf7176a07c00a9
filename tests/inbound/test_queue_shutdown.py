"""SES queue messages the poller could not apply while shutting down are handed back at once
(visibility 0) for a replica that stays, never left to wait out the visibility timeout; on
moto's SQS in server mode, with a store that cannot be reached."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from services.ctl.embedded import free_port
from services.poller.inbound.ingest import Ingest
from services.poller.inbound.queue import SesQueue
from services.poller.settings import PollerSettings
from shared import ids
from tests.inbound.conftest import Inbound
from tests.inbound.providers import iso, ses_event
from tests.support.moto_server import aws_client


async def test_a_batch_not_applied_at_shutdown_is_handed_back_at_once(inbound: Inbound) -> None:
    async with aws_client("sqs", inbound.aws.endpoint) as sqs:
        queue = (await sqs.create_queue(QueueName=f"shutdown-{time.monotonic_ns()}"))["QueueUrl"]
        for n in range(2):
            op = ids.operation_id(1)
            body = json.dumps(ses_event(op, f"m-{n}", "Delivery", iso(time.time())))
            await sqs.send_message(QueueUrl=queue, MessageBody=body)
        got = await sqs.receive_message(
            QueueUrl=queue, MaxNumberOfMessages=10, VisibilityTimeout=600, WaitTimeSeconds=1
        )
        messages = got["Messages"]
        assert len(messages) == 2
        down = Redis(port=free_port(), socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))
        settings = PollerSettings(provider_api_key="k", partitions=4, ses_queue_url=queue)
        stop = asyncio.Event()
        stop.set()  # shutting down
        with pytest.raises(RedisConnectionError):
            await SesQueue(settings, Ingest(down, settings))._handle_or_release(sqs, messages, stop)
        again = await sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=2)
        await down.aclose()
    assert len(again.get("Messages", [])) == 2, "visible again, long before 600 s"

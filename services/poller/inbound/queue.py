"""Amazon SES events from the SQS queue subscribed to the configuration set's SNS topic.

Long polling (``WaitTimeSeconds``), up to ten messages a receive. A message is deleted only
after its events were applied (or counted and dropped): a poller that dies or a store that
fails in between leaves it in the queue, and SQS hands it out again after the visibility
timeout (the dedupe in ``apply_delivery`` makes the second pass harmless). A message that is
not an SES event at all goes to the dead-letter queue when one is configured; without one it
is left for the queue's own redrive policy (``maxReceiveCount``) to move. A batch that could
not be applied while the poller is shutting down (the store failed, or the grace period ran
out) is handed back at once (visibility 0) for a replica that stays, instead of waiting out
the visibility timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from services.poller.inbound import ses
from services.poller.inbound.events import Parsed
from services.poller.inbound.ingest import Ingest
from services.poller.inbound.sources import Source
from services.poller.settings import PollerSettings
from shared import metrics, tracing
from shared.logging import event
from shared.loops import Step
from shared.providers.base import ProviderUnavailable
from shared.providers.ses import KIND, SesInbound

log = logging.getLogger(__name__)
BATCH = 10  # the most SQS hands out per receive
RELEASE_SECONDS = 2.0  # the most shutdown waits for SQS to take messages back


@dataclass(slots=True)
class Sorted:
    parsed: Parsed = field(default_factory=Parsed)
    done: list[dict[str, str]] = field(default_factory=list)  # to delete once applied
    unparseable: list[dict[str, Any]] = field(default_factory=list)


def sort(messages: list[dict[str, Any]]) -> Sorted:
    """Parse a receive's messages into one batch of events, and the ones that are not events."""
    result = Sorted()
    dropped: Counter[Any] = Counter()
    for message in messages:
        entry = {"Id": str(len(result.done)), "ReceiptHandle": message["ReceiptHandle"]}
        try:
            parsed = ses.parse(str(message.get("Body", "")))
        except Exception:  # one the parser chokes on goes where a non-event goes; the rest apply
            result.unparseable.append(message)
            continue
        result.parsed.events += parsed.events
        dropped.update(parsed.dropped)
        result.done.append(entry)
    result.parsed.dropped.update(dropped)
    return result


class SesQueue:
    def __init__(
        self, settings: PollerSettings, ingest: Ingest, source: Source | None = None
    ) -> None:
        """``source``: one configured provider's queue (inbound/sources.py); None: the
        per-kind ``RESETGATE_SES_QUEUE_URL``, for any provider."""
        self.source = source or Source(KIND.name, KIND.name, None, settings.inbound(KIND.name))
        self.own = self.source.own(SesInbound)  # its queue URLs and SQS client
        self.ingest = ingest

    def _client(self) -> Any:
        # Imported here: aiobotocore costs 0.6 s of CPU at import (1 s without cached bytecode),
        # which only a poller that reads SES events should pay.
        from aiobotocore.config import AioConfig
        from aiobotocore.session import get_session

        config = AioConfig(
            connect_timeout=5,
            read_timeout=self.own.ses_wait_seconds + 10,
            retries={"max_attempts": 2, "mode": "standard"},
        )
        return get_session().create_client(
            "sqs",
            region_name=self.own.aws_region,
            config=config,
            endpoint_url=self.own.aws_endpoint_url or None,
        )

    @asynccontextmanager
    async def receiving(self, stop: asyncio.Event) -> AsyncIterator[Step]:
        """The loop's step (receive, apply, delete), with the SQS client open while it runs."""
        async with self._client() as sqs:
            yield functools.partial(self._step, sqs, stop)

    async def _step(self, sqs: Any, stop: asyncio.Event) -> float:
        try:
            messages = await self._receive(sqs, stop)
            if messages:
                await self._handle_or_release(sqs, messages, stop)
        except (BotoCoreError, ClientError) as error:
            # botocore's messages name the queue, never a payload; the type is enough here.
            raise ProviderUnavailable(f"SQS: {type(error).__name__}") from None
        return 0.0

    async def _receive(self, sqs: Any, stop: asyncio.Event) -> list[dict[str, Any]]:
        """One long poll, abandoned at shutdown (what it would have returned stays queued)."""
        with tracing.unrecorded_http():  # the task copies the context: its call is not traced
            receive = asyncio.ensure_future(
                sqs.receive_message(
                    QueueUrl=self.own.ses_queue_url,
                    MaxNumberOfMessages=BATCH,
                    WaitTimeSeconds=self.own.ses_wait_seconds,
                )
            )
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait([receive, stopping], return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not receive.done():
            receive.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await receive
            return []
        return list(receive.result().get("Messages", []))

    async def _handle_or_release(
        self, sqs: Any, messages: list[dict[str, Any]], stop: asyncio.Event
    ) -> None:
        try:
            await self._handle(sqs, messages)
        except BaseException:
            if stop.is_set():
                await self.release(sqs, messages)
            raise

    async def release(self, sqs: Any, messages: list[dict[str, Any]]) -> None:
        """Make messages visible again now (best effort: else the visibility timeout does)."""
        entries = [
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
            for i, m in enumerate(messages)
        ]
        try:
            async with asyncio.timeout(RELEASE_SECONDS):
                await sqs.change_message_visibility_batch(
                    QueueUrl=self.own.ses_queue_url, Entries=entries
                )
        except (BotoCoreError, ClientError, TimeoutError) as error:
            event(
                log,
                logging.WARNING,
                "SQS messages not handed back; they return after the visibility timeout",
                count=len(entries),
                error=type(error).__name__,
            )
            return
        metrics.queue_messages.labels(self.source.route, "released").inc(len(entries))
        event(log, logging.INFO, "SQS messages handed back at shutdown", count=len(entries))

    async def _handle(self, sqs: Any, messages: list[dict[str, Any]]) -> None:
        batch = sort(messages)
        source = self.source  # a store error leaves them queued
        await self.ingest.apply(source.route, batch.parsed, source.providers)
        if batch.done:
            await sqs.delete_message_batch(QueueUrl=self.own.ses_queue_url, Entries=batch.done)
            metrics.queue_messages.labels(self.source.route, "applied").inc(len(batch.done))
        for message in batch.unparseable:
            await self._dead_letter(sqs, message)

    async def _dead_letter(self, sqs: Any, message: dict[str, Any]) -> None:
        if not self.own.ses_dead_letter_queue_url:
            metrics.queue_messages.labels(self.source.route, "returned").inc()
            return  # left for the queue's redrive policy
        await sqs.send_message(
            QueueUrl=self.own.ses_dead_letter_queue_url,
            MessageBody=str(message.get("Body", "")),
        )
        await sqs.delete_message(
            QueueUrl=self.own.ses_queue_url, ReceiptHandle=message["ReceiptHandle"]
        )
        metrics.queue_messages.labels(self.source.route, "dead_lettered").inc()
        event(
            log,
            logging.WARNING,
            "unparseable SES queue message dead-lettered",
            message_id=str(message.get("MessageId", ""))[:64],
        )

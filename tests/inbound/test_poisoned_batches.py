"""One poisoned event in a batch is counted and dropped alone; the rest of the batch applies.

The poison is an operation id whose ULID holds a letter Crockford base32 leaves out (I, L, O,
U): the old pattern ``[0-9A-Z]{26}`` admitted it, and reading its creation time then raised
in the middle of the batch. On the real poller process: an SES batch through a real SQS
(moto) and a signed SendGrid batch on the webhook port.
"""

from __future__ import annotations

import time

from shared import codec, ids
from tests.e2e.conftest import poll
from tests.inbound.conftest import Inbound
from tests.inbound.providers import iso, sendgrid_event, ses_event
from tests.support.moto_server import aws_client

DROPPED = "resetgate_inbound_events_dropped_total"


def poisoned(operation_id: str) -> str:
    """The same partition, a ULID with an I among its time characters."""
    head, ulid = operation_id.rsplit("-", 1)
    return f"{head}-{ulid[:3]}I{ulid[4:]}"


async def test_a_poisoned_ses_event_is_dropped_and_its_batch_applied(inbound: Inbound) -> None:
    op, mid = await inbound.accepted("poison-ses")
    poller = inbound["poller"]
    before = await poller.metric(DROPPED, provider="ses", reason="unknown_operation")
    now = iso(time.time())
    bodies = [ses_event(poisoned(op), mid, "Bounce", now), ses_event(op, mid, "Delivery", now)]
    async with aws_client("sqs", inbound.aws.endpoint) as sqs:
        entries = [{"Id": str(i), "MessageBody": codec.dumps_str(b)} for i, b in enumerate(bodies)]
        await sqs.send_message_batch(QueueUrl=inbound.aws.queue_url, Entries=entries)
        await inbound.until(op, lambda view: view["delivery"] == "delivered", timeout=60)

        async def counted() -> bool:
            dropped = await poller.metric(DROPPED, provider="ses", reason="unknown_operation")
            return dropped == before + 1

        await poll(counted, timeout=30, every=0.2)

        async def emptied() -> bool:
            left = await sqs.get_queue_attributes(
                QueueUrl=inbound.aws.queue_url,
                AttributeNames=[
                    "ApproximateNumberOfMessages",
                    "ApproximateNumberOfMessagesNotVisible",
                ],
            )
            return set(left["Attributes"].values()) == {"0"}

        await poll(emptied, timeout=30, every=0.2)  # both deleted: none waits for a redrive


async def test_a_poisoned_sendgrid_event_is_dropped_and_its_batch_applied(
    inbound: Inbound,
) -> None:
    op, mid = await inbound.accepted("poison-sg")
    at = time.time()
    body = codec.dumps(
        [
            sendgrid_event(poisoned(op), mid, "bounce", at),
            sendgrid_event(op, mid, "delivered", at),
        ]
    )
    status, answer = await inbound.post("sendgrid", body, inbound.signer.headers(body))
    assert (status, answer.get("applied"), answer.get("dropped")) == (200, 1, 1), answer
    assert (await inbound.operation(op))["delivery"] == "delivered"


def test_operation_ids_take_only_crockford_base32() -> None:
    good = ids.operation_id(3)
    assert ids.valid_operation_id(good)
    for letter in "ILOU":
        assert not ids.valid_operation_id(f"{good[:-1]}{letter}"), letter
    assert not ids.valid_operation_id(f"op-3-8{good[-25:]}"), "26 characters hold 128 bits"

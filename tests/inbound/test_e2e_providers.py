"""End to end on real processes, one provider at a time: admitted, accepted by the sender,
then the provider's event arrives by the provider's mechanism (signed webhook POST, or SES
event published on the SNS topic that moto delivers to the SQS queue), and support sees it
in ``GET /internal/v1/recovery-operations/{id}``.

Pages the payloads follow: SendGrid twilio.com/docs/sendgrid/for-developers/tracking-events/
event (+ getting-started-event-webhook-security-features); Mailgun documentation.mailgun.com/
docs/mailgun/user-manual/events/ (+ webhooks/securing-webhooks); Postmark postmarkapp.com/
developer/webhooks/delivery-webhook, /bounce-webhook, /spam-complaint-webhook; SES docs.aws.
amazon.com/ses/latest/dg/event-publishing-retrieving-sns-examples.html.
"""

from __future__ import annotations

import json
import time

from services.ctl.embedded import free_port
from shared import codec
from tests.e2e.conftest import poll
from tests.inbound.conftest import Inbound
from tests.inbound.providers import (
    basic_auth,
    iso,
    mailgun_body,
    postmark_record,
    sendgrid_event,
    ses_event,
)
from tests.support.moto_server import aws_client
from tests.support.processes import ServiceProcess
from tests.support.webhooks import MAILGUN_KEY, POSTMARK_PASSWORD, POSTMARK_USER


def delivery_is(value: str):  # type: ignore[no-untyped-def]
    return lambda view: view["delivery"] == value


async def test_sendgrid_delivered_then_spamreport(inbound: Inbound) -> None:
    op, message_id = await inbound.accepted("in-sendgrid")
    at = time.time()
    body = codec.dumps(
        [
            sendgrid_event(op, message_id, "processed", at - 2),
            sendgrid_event(op, message_id, "delivered", at - 1),
        ]
    )
    status, answer = await inbound.post("sendgrid", body, inbound.signer.headers(body))
    assert (status, answer["applied"], answer["acceptances"]) == (200, 1, 1), answer
    view = await inbound.until(op, delivery_is("delivered"))
    assert view["state"] == "accepted" and view["delivery_observed_at"]
    body = codec.dumps([sendgrid_event(op, message_id, "spamreport", at)])
    assert (await inbound.post("sendgrid", body, inbound.signer.headers(body)))[0] == 200
    await inbound.until(op, delivery_is("complained"))


async def test_mailgun_permanent_failure_is_bounced(inbound: Inbound) -> None:
    op, message_id = await inbound.accepted("in-mailgun")
    body = mailgun_body(MAILGUN_KEY, op, message_id, "failed", time.time(), severity="permanent")
    status, answer = await inbound.post("mailgun", body, {"Content-Type": "application/json"})
    assert (status, answer["applied"]) == (200, 1), answer
    view = await inbound.until(op, delivery_is("bounced"))
    assert view["state"] == "accepted", "delivery is apart from acceptance"


async def test_postmark_delivery_then_spam_complaint(inbound: Inbound) -> None:
    op, message_id = await inbound.accepted("in-postmark")
    auth = basic_auth(POSTMARK_USER, POSTMARK_PASSWORD)
    for record, expected in (("Delivery", "delivered"), ("SpamComplaint", "complained")):
        body = codec.dumps(postmark_record(op, message_id, record, iso(time.time())))
        status, answer = await inbound.post("postmark", body, auth)
        assert (status, answer["applied"]) == (200, 1), answer
        await inbound.until(op, delivery_is(expected))


async def test_ses_events_arrive_through_sns_and_sqs(inbound: Inbound) -> None:
    delivered, delivered_id = await inbound.accepted("in-ses-delivered")
    bounced, bounced_id = await inbound.accepted("in-ses-bounced")
    poller = inbound["poller"]
    applied = await poller.metric("resetgate_queue_messages_total", result="applied")
    async with aws_client("sns", inbound.aws.endpoint) as sns:
        for op, mid, kind in (
            (delivered, delivered_id, "Delivery"),
            (bounced, bounced_id, "Bounce"),
        ):
            record = ses_event(op, mid, kind, iso(time.time()))
            await sns.publish(TopicArn=inbound.aws.topic_arn, Message=json.dumps(record))
    await inbound.until(delivered, delivery_is("delivered"))
    await inbound.until(bounced, delivery_is("bounced"))

    async def deleted() -> bool:  # counted right after the delete, a moment after the apply
        return (
            await poller.metric("resetgate_queue_messages_total", result="applied") >= applied + 2
        )

    await poll(deleted, timeout=10, every=0.1)
    async with aws_client("sqs", inbound.aws.endpoint) as sqs:
        left = await sqs.get_queue_attributes(
            QueueUrl=inbound.aws.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )
    counts = left["Attributes"]
    assert counts["ApproximateNumberOfMessages"] == "0", "deleted once applied"
    assert counts["ApproximateNumberOfMessagesNotVisible"] == "0"


async def test_poller_with_listener_and_queue_stops_cleanly(inbound: Inbound) -> None:
    """SIGTERM: the listener and the queue reader return once shutdown begins, which is not
    a failed worker: exit 0 (a worker that died would make it non-zero).

    A poller of its own beside the package's, with the same settings: stopping the package's
    poller gave up its ports until it was back, and a port another process took meanwhile
    (parallel workers and other suites draw from one range) left it not listening, or its
    readiness answered by that other process, for every later test in the package."""
    shared = inbound["poller"]
    env = {**shared.env, "RESETGATE_WEBHOOK_PORT": str(free_port())}
    poller = ServiceProcess("poller-stopped", env, shared.log_path.parent, module="services.poller")
    try:
        await poller.start()
        op, message_id = await inbound.accepted("in-stopped")
        body = codec.dumps([sendgrid_event(op, message_id, "delivered", time.time())])
        headers = inbound.signer.headers(body)
        assert (await inbound.post("sendgrid", body, headers, poller=poller))[0] == 200
    finally:
        code = await poller.stop()
    assert code == 0, poller.tail()

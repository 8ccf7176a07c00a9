"""Hostile input on the webhook port and the SES queue, against the real poller process.

Forged, missing or stale credentials are a 401 and apply nothing; a replay applies once;
oversized, non-JSON or misshapen bodies are a 4xx; unknown types, unknown operations and
absurd dates are counted (a metric) and dropped; a queue message that is not an SES event is
dead-lettered. Payloads carry the player's address (as real ones do): afterwards no log
line, metric or Redis key of the stack holds it (invariant 8, the scan of tests/security).
"""

from __future__ import annotations

import time

from redis.asyncio import Redis

from shared import codec
from tests.e2e.conftest import poll
from tests.inbound.conftest import MAX_BODY, Inbound
from tests.inbound.providers import (
    RECIPIENT,
    SendGridSigner,
    basic_auth,
    iso,
    mailgun_body,
    postmark_record,
    sendgrid_event,
    ses_event,
)
from tests.security.scan import metric_data, redis_contents, scan
from tests.support.moto_server import aws_client
from tests.support.webhooks import MAILGUN_KEY, POSTMARK_PASSWORD, POSTMARK_USER

JSON = {"Content-Type": "application/json"}


async def untouched(inbound: Inbound, op: str) -> None:
    view = await inbound.operation(op)
    assert (view["delivery"], view["delivery_observed_at"]) == ("unknown", None), view


async def test_forged_missing_and_stale_sendgrid_signatures_apply_nothing(inbound: Inbound) -> None:
    op, mid = await inbound.accepted("hostile-sg")
    body = codec.dumps([sendgrid_event(op, mid, "delivered", time.time())])
    forged = SendGridSigner.generate().headers(body)  # a key that is not the configured one
    tampered = inbound.signer.headers(body)
    stale = inbound.signer.headers(body, timestamp=int(time.time()) - 3600)
    future = inbound.signer.headers(body, timestamp=int(time.time()) + 3600)
    poller = inbound["poller"]
    refused = await poller.metric("resetgate_webhook_requests_total", status="401")
    for headers, data in (
        (forged, body),
        (JSON, body),
        (stale, body),
        (future, body),
        (tampered, body.replace(b"delivered", b"bounce")),
    ):
        status, answer = await inbound.post("sendgrid", data, headers)
        assert (status, answer["error"]) == (401, "unauthorized"), answer
    assert await poller.metric("resetgate_webhook_requests_total", status="401") == refused + 5
    await untouched(inbound, op)


async def test_mailgun_replayed_token_is_refused_and_applied_once(inbound: Inbound) -> None:
    op, mid = await inbound.accepted("hostile-mg")
    body = mailgun_body(MAILGUN_KEY, op, mid, "delivered", time.time())
    first = await inbound.post("mailgun", body, JSON)
    again = await inbound.post("mailgun", body, JSON)
    assert (first[0], first[1]["applied"]) == (200, 1)
    assert (again[0], again[1]["error"]) == (406, "replayed"), "Mailgun does not retry a 406"
    # Signed anew (Mailgun's own retry): same event, new token -> a duplicate, not a 2nd apply.
    resigned = mailgun_body(
        MAILGUN_KEY, op, mid, "delivered", codec.loads(body)["event-data"]["timestamp"]
    )
    status, answer = await inbound.post("mailgun", resigned, JSON)
    assert (status, answer["applied"], answer["duplicate"]) == (200, 0, 1)
    wrong_key = mailgun_body("not-the-key-0123456789", op, mid, "failed", time.time())
    assert (await inbound.post("mailgun", wrong_key, JSON))[0] == 401
    # Beyond Mailgun's retry horizon (8 h, .../user-manual/webhooks/webhook-retries): refused.
    stale = mailgun_body(
        MAILGUN_KEY, op, mid, "failed", time.time(), timestamp=int(time.time()) - 9 * 3600
    )
    assert (await inbound.post("mailgun", stale, JSON))[0] == 401
    assert (await inbound.operation(op))["delivery"] == "delivered"


async def test_a_mailgun_retry_hours_later_with_its_first_signature_is_applied(
    inbound: Inbound,
) -> None:
    """Mailgun retries a POST we could not take (a 503 in a Redis blip) after 5 min, 10 min,
    15 min, 1 h, 2 h and 4 h with the signature it first made: within that horizon an
    unseen token is believed (a seen one is a replay, 406), so the retry is not lost."""
    op, mid = await inbound.accepted("retry-mg")
    signed_at = int(time.time()) - int(3.5 * 3600)  # the 1 h + 2 h retries have passed
    # (The event's own time is now: an event older than its operation is dropped as absurd.)
    retry = mailgun_body(MAILGUN_KEY, op, mid, "delivered", time.time(), timestamp=signed_at)
    status, answer = await inbound.post("mailgun", retry, JSON)
    assert (status, answer["applied"]) == (200, 1), str(answer)
    assert (await inbound.post("mailgun", retry, JSON))[0] == 406
    future = mailgun_body(
        MAILGUN_KEY, op, mid, "delivered", time.time(), timestamp=int(time.time()) + 3600
    )
    assert (await inbound.post("mailgun", future, JSON))[0] == 401


async def test_bad_bodies_are_4xx_and_junk_events_are_counted(inbound: Inbound) -> None:
    op, mid = await inbound.accepted("hostile-pm")
    auth = basic_auth(POSTMARK_USER, POSTMARK_PASSWORD)
    poller = inbound["poller"]
    assert (await inbound.post("postmark", b"{}", basic_auth(POSTMARK_USER, "guess")))[0] == 401
    assert (await inbound.post("postmark", b"{}", JSON))[0] == 401
    assert (await inbound.post("postmark", b"{not json", auth))[0] == 400
    assert (await inbound.post("postmark", b"[1, 2]", auth))[0] == 400
    huge = b'{"RecordType": "Delivery", "Details": "' + b"x" * MAX_BODY + b'"}'
    assert (await inbound.post("postmark", huge, auth))[0] == 413
    assert (await inbound.post("nonesuch", b"{}", auth))[0] == 404
    before = {
        r: await poller.metric("resetgate_inbound_events_dropped_total", reason=r)
        for r in ("unknown_type", "unknown_operation", "out_of_range")
    }
    now = iso(time.time())
    junk = [
        postmark_record(op, mid, "Delivery", now, RecordType="Teleported"),
        postmark_record("op-3-01HZZZZZZZZZZZZZZZZZZZZZZZ", mid, "Delivery", now),
        postmark_record("'; DROP TABLE operations; --", mid, "Delivery", now),
        postmark_record(op, mid, "Delivery", "2999-01-01T00:00:00Z"),
        postmark_record(op, mid, "Delivery", "1999-01-01T00:00:00Z"),
    ]
    for record in junk:
        status, answer = await inbound.post("postmark", codec.dumps(record), auth)
        assert (status, answer["applied"], answer["dropped"]) == (200, 0, 1), answer
    after = {
        r: await poller.metric("resetgate_inbound_events_dropped_total", reason=r) for r in before
    }
    assert {r: after[r] - before[r] for r in before} == {
        "unknown_type": 1,
        "unknown_operation": 2,
        "out_of_range": 2,
    }
    await untouched(inbound, op)


async def test_unparseable_queue_message_is_dead_lettered(inbound: Inbound) -> None:
    poller = inbound["poller"]
    before = await poller.metric("resetgate_queue_messages_total", result="dead_lettered")
    async with aws_client("sqs", inbound.aws.endpoint) as sqs:
        await sqs.send_message(QueueUrl=inbound.aws.queue_url, MessageBody=f"<html>{RECIPIENT}")

        async def moved() -> bool:
            count = await poller.metric("resetgate_queue_messages_total", result="dead_lettered")
            return count > before

        await poll(moved, timeout=60, every=0.2)  # moto answers slowly on a loaded machine
        dead = await sqs.receive_message(QueueUrl=inbound.aws.dead_letter_url, WaitTimeSeconds=1)
    assert [m["Body"] for m in dead.get("Messages", [])] == [f"<html>{RECIPIENT}"]


async def test_invariant_8_no_address_from_a_payload_at_rest(inbound: Inbound) -> None:
    """One event of each provider (all naming RECIPIENT, as real payloads do), then the scan;
    whatever else ran on this stack before is scanned too."""
    op, mid = await inbound.accepted("hostile-pii")
    at = time.time()
    body = codec.dumps([sendgrid_event(op, mid, "deferred", at - 3)])
    assert (await inbound.post("sendgrid", body, inbound.signer.headers(body)))[0] == 200
    body = mailgun_body(MAILGUN_KEY, op, mid, "delivered", at - 2)
    assert (await inbound.post("mailgun", body, JSON))[0] == 200
    body = codec.dumps(postmark_record(op, mid, "Bounce", iso(at - 1)))
    auth = basic_auth(POSTMARK_USER, POSTMARK_PASSWORD)
    assert (await inbound.post("postmark", body, auth))[0] == 200
    async with aws_client("sns", inbound.aws.endpoint) as sns:
        record = ses_event(op, mid, "Complaint", iso(at))
        await sns.publish(TopicArn=inbound.aws.topic_arn, Message=codec.dumps_str(record))
    # Through moto's SNS and SQS, which answer slowly on a loaded machine.
    await inbound.until(op, lambda view: view["delivery"] == "complained", timeout=60)
    findings = []
    for service in inbound.processes.services.values():
        findings += scan(f"{service.name} log", service.logs(), {"recipient": [RECIPIENT]})
        page = await service.metrics_text()
        findings += scan(
            f"{service.name} /metrics", page, {"recipient": [RECIPIENT]}, metric_data(page)
        )
    raw = Redis.from_url(inbound.processes["poller"].env["RESETGATE_REDIS_URL"])
    try:
        async for key, content in redis_contents(raw):
            findings += scan(f"redis {key}", key + " " + content, {"recipient": [RECIPIENT]})
    finally:
        await raw.aclose()
    assert not findings, "\n".join(map(str, findings))

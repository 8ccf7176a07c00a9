"""What a hostile provider (or whoever captured its requests) found in the second hardening
pass, against the real poller process: a Mailgun signature re-split between its timestamp
and its token, and one signed request of 15,000 distinct events for one operation."""

from __future__ import annotations

import secrets
import time

from shared import codec
from shared.delivery import REMEMBERED_EVENTS
from shared.keys import PartitionKeys
from tests.inbound.conftest import MAX_BODY, Inbound
from tests.inbound.providers import mailgun_body
from tests.support.webhooks import MAILGUN_KEY

JSON = {"Content-Type": "application/json"}


async def test_a_mailgun_signature_re_split_into_a_fresh_token_is_refused(
    inbound: Inbound,
) -> None:
    op, mid = await inbound.accepted("hostile-mg-split")
    # One token in 256 starts with "e0": moved onto the timestamp, "<ts>e0" still reads as
    # the same number, and the rest is a token the replay guard has never seen.
    token = "e0" + secrets.token_hex(24)
    body = mailgun_body(MAILGUN_KEY, op, mid, "delivered", time.time(), token=token)
    assert (await inbound.post("mailgun", body, JSON))[0] == 200
    document = codec.loads(body)
    signature = document["signature"]
    signature["timestamp"] += "e0"
    signature["token"] = signature["token"][2:]
    status, answer = await inbound.post("mailgun", codec.dumps(document), JSON)
    assert (status, answer.get("error")) == (401, "unauthorized"), answer


async def test_distinct_events_for_one_operation_never_grow_its_hash_past_a_bound(
    inbound: Inbound,
) -> None:
    """15,000 distinct events for one operation, as many signed requests as the test's body
    limit needs (the default 2 MiB takes them in one): its hash grew by a field per event."""
    op, mid = await inbound.accepted("hostile-sg-dedupe")
    key = PartitionKeys.of(op).operation(op)
    fields = 0
    at = int(time.time())
    events = [
        {"event": "deferred", "timestamp": at, "sg_message_id": f"{mid}{i}.f", "operation_id": op}
        for i in range(15_000)
    ]
    for body in _bodies(events[:1], MAX_BODY) + _bodies(events[1:], MAX_BODY):
        status, answer = await inbound.post("sendgrid", body, inbound.signer.headers(body))
        assert status == 200, answer
        # After the first: the delivery fields, one event remembered and the next slot.
        fields = fields or await inbound.redis.hlen(key)
    total = await inbound.redis.hlen(key)
    print(
        f"\n15,000 distinct events: {total} fields ({await inbound.redis.memory_usage(key)} bytes)"
    )
    assert total <= fields + REMEMBERED_EVENTS - 1
    # A copy of the latest event is still known as one.
    body = codec.dumps(events[-1:])
    _, answer = await inbound.post("sendgrid", body, inbound.signer.headers(body))
    assert answer["duplicate"] == 1, answer


def _bodies(events: list[dict[str, object]], limit: int) -> list[bytes]:
    bodies: list[bytes] = []
    batch: list[dict[str, object]] = []
    for event in events:
        if batch and len(codec.dumps([*batch, event])) > limit - 1024:
            bodies.append(codec.dumps(batch))
            batch = []
        batch.append(event)
    return [*bodies, codec.dumps(batch)]

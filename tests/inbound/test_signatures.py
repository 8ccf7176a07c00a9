"""Signature checks and event tables of each provider, without a store.

SendGrid publishes a verification vector with its SDKs (the key, signature, timestamp and
body of sendgrid-python's test/unit/test_eventwebhook.py, which implements the check the
security-features page describes); it must verify here byte for byte, and fail on any
change. Mailgun's "Securing Webhooks" page shows a signature block but not the key that made
it, so there is no vector to replay: the check is exercised with a key of our own.
"""

from __future__ import annotations

import json
import time

import pytest

from services.poller.inbound import mailgun, postmark, sendgrid, ses
from services.poller.inbound.events import Acceptance, Drop, Rejected, check_fresh
from shared import codec
from shared.model import Delivery
from shared.providers.postmark import networks
from shared.providers.sendgrid import public_key
from tests.inbound.providers import (
    SendGridSigner,
    basic_auth,
    iso,
    mailgun_body,
    postmark_record,
    sendgrid_event,
    ses_event,
)

# sendgrid-python test/unit/test_eventwebhook.py (SendGrid's own vector).
SG_PUBLIC_KEY = (
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1"
    "flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g=="
)
SG_SIGNATURE = (
    "MEUCIGHQVtGj+Y3LkG9fLcxf3qfI10QysgDWmMOVmxG0u6ZUAiEAyBiXDWzM+uOe5W0JuG+luQAbPI"
    "qHh89M15TluLtEZtM="
)
SG_TIMESTAMP = "1600112502"
SG_PAYLOAD = (
    json.dumps(
        [
            {
                "email": "hello@world.com",
                "event": "dropped",
                "reason": "Bounced Address",
                "sg_event_id": "ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV9BLTA",
                "sg_message_id": "LRzXl_NHStOGhQ4kofSm_A.filterdrecv-p3mdw1-756b745b58-kmzbl-18"
                "-5F5FC76C-9.0",
                "smtp-id": "<LRzXl_NHStOGhQ4kofSm_A@ismtpd0039p1iad1.sendgrid.net>",
                "timestamp": 1600112492,
            }
        ],
        sort_keys=True,
        separators=(",", ":"),
    ).encode()
    + b"\r\n"
)


def test_sendgrid_documented_vector_verifies() -> None:
    sendgrid.verify(public_key(SG_PUBLIC_KEY), SG_SIGNATURE, SG_TIMESTAMP, SG_PAYLOAD)


@pytest.mark.parametrize("change", ["payload", "timestamp", "signature", "key", "missing"])
def test_sendgrid_vector_fails_on_any_change(change: str) -> None:
    key, signature, stamp, payload = SG_PUBLIC_KEY, SG_SIGNATURE, SG_TIMESTAMP, SG_PAYLOAD
    if change == "payload":
        payload = payload.replace(b"dropped", b"delivered")
    elif change == "timestamp":
        stamp = "1600112503"
    elif change == "signature":  # the SDK's "bad signature" case: one byte off
        signature = SG_SIGNATURE[:-6] + "Z" + SG_SIGNATURE[-5:]
    elif change == "key":
        key = SendGridSigner.generate().public_key
    with pytest.raises(Rejected) as error:
        sendgrid.verify(public_key(key), None if change == "missing" else signature, stamp, payload)
    assert error.value.status == 401


def test_sendgrid_vector_event_maps_through_the_table() -> None:
    parsed = sendgrid.parse(SG_PAYLOAD)
    # The SDK's event carries no operation id (not sent by resetgate): counted, not applied.
    assert parsed.events == [] and parsed.dropped == {Drop.NO_OPERATION: 1}


def test_sendgrid_batch_parses_every_kind() -> None:
    at = time.time()
    rows = [
        sendgrid_event("op-1-A", "msg1", kind, at, **extra)
        for kind, extra in [
            ("processed", {}),
            ("delivered", {}),
            ("deferred", {}),
            ("bounce", {"type": "bounce"}),
            ("bounce", {"type": "blocked"}),
            ("dropped", {}),
            ("spamreport", {}),
            ("open", {}),
            ("made_up", {}),
        ]
    ]
    parsed = sendgrid.parse(codec.dumps([*rows, "not an object"]))
    assert [e.meaning for e in parsed.events] == [
        Acceptance.ACCEPTED,
        Delivery.DELIVERED,
        Delivery.DEFERRED,
        Delivery.BOUNCED,
        Delivery.REJECTED,
        Delivery.REJECTED,
        Delivery.COMPLAINED,
    ]
    assert {e.message_id for e in parsed.events} == {"msg1"}, "X-Message-Id, not the suffix"
    assert parsed.dropped == {Drop.IGNORED_TYPE: 1, Drop.UNKNOWN_TYPE: 1, Drop.MALFORMED: 1}


def test_stale_and_future_signed_timestamps_are_refused() -> None:
    now = int(time.time() * 1000)
    check_fresh(str(now // 1000 - 200), 300, now)
    for stamp in (str(now // 1000 - 301), str(now // 1000 + 301), "soon", None):
        with pytest.raises(Rejected):
            check_fresh(stamp, 300, now)


def test_a_retry_horizon_believes_older_timestamps_but_never_future_ones() -> None:
    now = int(time.time() * 1000)
    check_fresh(str(now // 1000 - 7 * 3600), 300, now, retry_horizon_seconds=8 * 3600)
    for stamp in (str(now // 1000 - 8 * 3600 - 1), str(now // 1000 + 301)):
        with pytest.raises(Rejected):
            check_fresh(stamp, 300, now, retry_horizon_seconds=8 * 3600)


KEY = "mailgun-signing-key-0123456789"


def test_mailgun_signature_and_forgeries() -> None:
    body = mailgun_body(KEY, "op-1-A", "20260101.1.ABC", "delivered", time.time())
    signed = mailgun.decode(body)
    mailgun.verify(KEY.encode(), signed)
    with pytest.raises(Rejected):
        mailgun.verify(b"another-key", signed)
    forged = codec.loads(body)
    forged["signature"]["timestamp"] = str(int(forged["signature"]["timestamp"]) + 1)
    with pytest.raises(Rejected):
        mailgun.verify(KEY.encode(), mailgun.decode(codec.dumps(forged)))
    forged["signature"]["signature"] = "é" * 64  # non-ASCII must fail, not crash
    with pytest.raises(Rejected):
        mailgun.verify(KEY.encode(), mailgun.decode(codec.dumps(forged)))
    with pytest.raises(Rejected) as missing:
        mailgun.decode(codec.dumps({"event-data": {}}))
    assert missing.value.status == 401


def test_mailgun_table_and_message_id() -> None:
    cases = {
        ("failed", "permanent"): Delivery.BOUNCED,
        ("failed", "temporary"): Delivery.DEFERRED,
        ("delivered", None): Delivery.DELIVERED,
        ("complained", None): Delivery.COMPLAINED,
        ("accepted", None): Acceptance.ACCEPTED,
        ("rejected", None): Delivery.REJECTED,
    }
    for (kind, severity), meaning in cases.items():
        extra = {"severity": severity} if severity else {}
        body = mailgun_body(KEY, "op-1-A", "20260101.1.ABC", kind, time.time(), **extra)
        parsed = mailgun.parse(mailgun.decode(body).event)
        assert [e.meaning for e in parsed.events] == [meaning]
        assert parsed.events[0].message_id == "20260101.1.ABC", "no address-shaped @domain"


def test_postmark_credentials_in_constant_time_and_networks() -> None:
    expected = b"hook-user:hook-password-0123"
    postmark.check_credentials(
        basic_auth("hook-user", "hook-password-0123")["Authorization"], expected
    )
    for header in (
        None,
        "Basic !!!",
        "Bearer x",
        basic_auth("hook-user", "wrong")["Authorization"],
    ):
        with pytest.raises(Rejected) as error:
            postmark.check_credentials(header, expected)
        assert error.value.status == 401
    allowed = networks("3.134.147.250, 50.31.156.0/24")
    postmark.check_source("50.31.156.77", allowed)
    postmark.check_source("203.0.113.9", [])
    for peer in ("203.0.113.9", None, "garbage"):
        with pytest.raises(Rejected) as denied:
            postmark.check_source(peer, allowed)
        assert denied.value.status == 403


def test_postmark_records() -> None:
    at = "2019-11-05T16:33:54.9070259Z"
    for record, meaning in [
        ("Delivery", Delivery.DELIVERED),
        ("Bounce", Delivery.BOUNCED),
        ("SpamComplaint", Delivery.COMPLAINED),
    ]:
        parsed = postmark.parse(codec.dumps(postmark_record("op-1-A", "883953f4", record, at)))
        assert [(e.meaning, e.occurred_ms) for e in parsed.events] == [(meaning, 1572971634907)]
    soft = postmark_record("op-1-A", "883953f4", "Bounce", at, Type="SoftBounce")
    assert [e.meaning for e in postmark.parse(codec.dumps(soft)).events] == [Delivery.DEFERRED]
    naive = postmark_record("op-1-A", "883953f4", "Delivery", "2019-11-05T16:33:54")
    assert postmark.parse(codec.dumps(naive)).dropped == {Drop.MALFORMED: 1}


def test_ses_envelope_raw_and_unparseable() -> None:
    at = iso(time.time())
    record = ses_event("op-1-A", "0100018f-example-000000", "Bounce", at)
    envelope = {"Type": "Notification", "MessageId": "x", "Message": json.dumps(record)}
    for body in (json.dumps(record), json.dumps(envelope)):
        assert [e.meaning for e in ses.parse(body).events] == [Delivery.BOUNCED]
    for junk in ("not json", "[]", json.dumps({"Type": "Notification", "Message": "{"})):
        with pytest.raises(ses.Unparseable):
            ses.parse(junk)
    no_tags = ses_event("op-1-A", "m", "Delivery", at)
    no_tags["mail"]["tags"] = {}
    assert ses.parse(json.dumps(no_tags)).dropped == {Drop.NO_OPERATION: 1}


@pytest.mark.parametrize(
    ("variable", "value"),
    [("sendgrid_webhook_public_key", "not a key"), ("postmark_webhook_networks", "10.0.0.0/33")],
)
def test_bad_webhook_settings_name_the_variable(variable: str, value: str) -> None:
    from pydantic import ValidationError

    from services.poller.settings import PollerSettings
    from shared.settings import describe_error

    with pytest.raises(ValidationError) as error:
        PollerSettings(provider_api_key="k", **{variable: value})  # type: ignore[arg-type]
    assert describe_error(error.value).startswith(
        f"invalid configuration: RESETGATE_{variable.upper()}: "
    )


def test_listener_starts_only_with_a_credential() -> None:
    from services.poller.inbound.sources import sources, webhook_sources
    from services.poller.settings import PollerSettings

    assert webhook_sources(sources(PollerSettings(provider_api_key="k"))) == []
    signer = SendGridSigner.generate()
    settings = PollerSettings(provider_api_key="k", sendgrid_webhook_public_key=signer.public_key)
    assert [s.route for s in webhook_sources(sources(settings))] == ["sendgrid"]

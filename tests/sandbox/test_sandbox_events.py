"""Lookups and the delivery-event feed: cursor paging, delays, bounces, duplicates, order."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime

import pytest


def at(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


async def test_lookup_by_idempotency_key(provider):
    sent = await provider.send(key="op-look")
    found = await provider.get("/email/messages", params={"idempotency_key": "op-look"})
    unknown = await provider.get("/email/messages", params={"idempotency_key": "op-never"})
    missing = await provider.get("/email/messages")
    assert found.status == 200
    [entry] = found.body["data"]
    assert entry["id"] == sent.body["id"]
    assert entry["idempotency_key"] == "op-look"
    assert entry["status"] in {"accepted", "delivered"}
    assert at(entry["created_at"]).tzinfo is not None
    assert unknown.body == {"data": []}
    assert missing.status == 400


async def test_lookup_forgets_keys_outside_the_idempotency_window(open_provider):
    async with open_provider(idempotency_window_seconds=0.2) as p:
        first = await p.send(key="op-w")
        await asyncio.sleep(0.3)
        found = await p.get("/email/messages", params={"idempotency_key": "op-w"})
        again = await p.send(key="op-w")
        stats = await p.stats()
    assert found.body == {"data": []}
    assert again.body["id"] != first.body["id"]
    assert "Idempotent-Replayed" not in again.headers
    # Two real emails for one key: exactly what the stats must make visible.
    assert stats["duplicate_sends_total"] == 1
    assert stats["duplicate_keys"] == ["op-w"]


async def test_delivered_event_appears_after_the_configured_delay(open_provider):
    # Two seconds: the early look must come before the delay ends even on a loaded machine;
    # then the event is awaited (not a fixed sleep) and must not have come before the delay.
    async with open_provider(delivered_delay_seconds=2.0) as p:
        sent_at = time.monotonic()
        sent = await p.send(key="op-d")
        early = await p.events()
        detail_early = await p.get(f"/email/messages/{sent.body['id']}")
        late = await _events_after(p, early.body["next"])
        waited = time.monotonic() - sent_at
        detail = await p.get(f"/email/messages/{sent.body['id']}")
    assert early.body["data"] == []
    assert waited >= 2.0
    assert detail_early.body["status"] == "accepted"
    [event] = late.body["data"]
    assert (event["message_id"], event["type"]) == (sent.body["id"], "delivered")
    assert event["event_id"].startswith("evt_")
    assert detail.body["status"] == "delivered"
    assert detail.body["events"] == [event]


async def test_bounce_domain_gets_a_bounced_event(open_provider):
    async with open_provider(delivered_delay_seconds=0, bounce_domain="bounce.example") as p:
        bounced = await p.send(key="op-b", to="gone@bounce.example")
        delivered = await p.send(key="op-ok", to="here@fine.example")
        feed = await p.events()
    types = {e["message_id"]: e["type"] for e in feed.body["data"]}
    assert types == {bounced.body["id"]: "bounced", delivered.body["id"]: "delivered"}


async def test_complaint_domain_gets_delivered_then_complained(open_provider):
    async with open_provider(delivered_delay_seconds=0, complaint_domain="spam.example") as p:
        sent = await p.send(key="op-c", to="angry@spam.example")
        await asyncio.sleep(0.01)
        feed = await p.events()
        detail = await p.get(f"/email/messages/{sent.body['id']}")
    assert [e["type"] for e in feed.body["data"]] == ["delivered", "complained"]
    assert detail.body["status"] == "complained"


async def test_cursor_pages_through_the_feed(provider):
    ids = [(await provider.send(key=f"op-{i}")).body["id"] for i in range(5)]
    seen, cursor, pages = [], "0", []
    for _ in range(4):
        page = await provider.events(after=cursor, limit=2)
        pages.append(len(page.body["data"]))
        seen += [e["message_id"] for e in page.body["data"]]
        cursor = page.body["next"]
    assert pages == [2, 2, 1, 0]
    assert seen == ids
    assert (await provider.events(after=cursor)).body == {"data": [], "next": cursor}


async def test_cursor_may_be_omitted_or_empty(provider):
    await provider.send()
    omitted = await provider.get("/email/events")
    empty = await provider.get("/email/events", params={"after": ""})
    assert len(omitted.body["data"]) == len(empty.body["data"]) == 1


@pytest.mark.parametrize(
    "params", [{"after": "x"}, {"after": "-1"}, {"limit": "0"}, {"limit": "5000"}]
)
async def test_bad_cursor_or_limit_gets_400(provider, params):
    assert (await provider.get("/email/events", params=params)).status == 400


async def test_duplicate_events_differ_only_in_event_id(open_provider):
    async with open_provider(delivered_delay_seconds=0.05, duplicate_event_every=1) as p:
        await p.send(key="op-dup")
        await asyncio.sleep(0.2)
        feed = await p.events()
    first, second = feed.body["data"]
    assert first["event_id"] != second["event_id"]
    same = ("message_id", "type", "occurred_at")
    assert [first[k] for k in same] == [second[k] for k in same]


async def test_out_of_order_events_do_not_regress_status(open_provider):
    async with open_provider(delivered_delay_seconds=0.05, out_of_order_every=1) as p:
        sent = await p.send(key="op-ooo")
        await asyncio.sleep(0.2)
        feed = await p.events()
        detail = await p.get(f"/email/messages/{sent.body['id']}")
    delivered, deferred = feed.body["data"]
    assert (delivered["type"], deferred["type"]) == ("delivered", "deferred")
    assert at(deferred["occurred_at"]) < at(delivered["occurred_at"])
    assert detail.body["status"] == "delivered"


async def test_unknown_message_gets_404(provider):
    reply = await provider.get("/email/messages/msg_unknown")
    assert reply.status == 404
    assert reply.body["error"] == "not_found"


async def test_polling_routes_can_fail_with_injected_5xx(open_provider):
    async with open_provider(poll_error_every=2) as p:
        statuses = [(await p.events()).status for _ in range(4)]
    assert statuses == [200, 503, 200, 503]


async def test_memory_is_bounded(open_provider):
    async with open_provider(delivered_delay_seconds=0, max_messages=3, max_events=4) as p:
        ids = [(await p.send(key=f"op-{i}")).body["id"] for i in range(10)]
        feed = await p.events(limit=1000)
        stats = await p.stats()
        oldest = await p.get(f"/email/messages/{ids[0]}")
    assert stats["messages_stored"] == 3
    assert stats["messages_evicted"] == 7
    assert stats["events_stored"] <= 5
    assert oldest.status == 404
    assert feed.body["data"][-1]["message_id"] == ids[-1]


async def test_a_cursor_past_the_feeds_end_is_refused_not_answered_empty(provider):
    """What a restarted sandbox sees from a poller that outlived it (docs/provider-contract.md):
    a cursor it never issued answers 410, so the poller can tell it from an idle feed."""
    await provider.send(key="op-before-the-end")
    await asyncio.sleep(0)
    end = (await provider.events("0")).body["next"]
    at_end = await provider.events(end)
    beyond = await provider.events(str(int(end) + 1000))
    assert at_end.status == 200 and at_end.body["data"] == []
    assert beyond.status == 410
    assert beyond.body["error"] == "cursor_beyond_feed"


async def _events_after(provider, cursor):
    """The feed after ``cursor``, polled until it holds an event (20 s at most)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        feed = await provider.events(after=cursor)
        if feed.body["data"]:
            return feed
        await asyncio.sleep(0.05)
    raise AssertionError("no event in time")

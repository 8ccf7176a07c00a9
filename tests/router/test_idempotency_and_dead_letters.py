"""A redelivered contact-form event never makes a second case, a router that dies at any
point between claim and ack loses no case, and a malformed event is dead-lettered (with no
login, address or free text) while the router keeps going."""

from __future__ import annotations

import asyncio

from aiohttp import ClientSession

from services.router import cases
from shared import clock, ids
from shared.directory import Account, HttpDirectory, RedisDirectory
from shared.keys import CONTACT_FORMS, ROUTER_GROUP, ROUTER_RETRY, router_seen
from shared.scripts.router import RouteClaim
from tests.poller.conftest import sample
from tests.router.conftest import Desk, wait_for

HOUR_MS = 3600 * 1000


async def test_the_same_event_submitted_twice_makes_one_case(desk: Desk) -> None:
    login = await desk.account("acct-dup")
    await desk.submit(event_id="evt-twice", login=login)
    await desk.submit(event_id="evt-twice", login=login)
    async with desk.router():
        await wait_for(desk.settled)
    (case,) = await desk.cases()
    assert case["event_id"] == "evt-twice"


async def test_an_entry_redelivered_after_its_case_is_acked_once(desk: Desk) -> None:
    # The router wrote the case and the seen record, then died before XACK.
    login = await desk.account("acct-redeliver")
    await desk.submit(event_id="evt-pending", login=login)
    await desk.redis.xgroup_create(CONTACT_FORMS, ROUTER_GROUP, id="0", mkstream=True)
    await desk.redis.xreadgroup(ROUTER_GROUP, "dead-router", {CONTACT_FORMS: ">"})
    async with desk.router():
        await wait_for(desk.settled)  # XAUTOCLAIM after claim_idle_seconds
        await desk.submit(event_id="evt-pending", login=login)
        await wait_for(desk.settled)
    assert [c["event_id"] for c in await desk.cases()] == ["evt-pending"]


async def test_crash_between_claim_and_case_still_makes_the_case(desk: Desk) -> None:
    login = await desk.account("acct-crash-1")
    case_id = ids.case_id()
    await RouteClaim(
        event_id="evt-crash-1",
        case_id=case_id,
        now=clock.now_ms() - HOUR_MS,
        ttl_ms=24 * HOUR_MS,
        stale_ms=1000,
    ).run(desk.redis)
    await desk.submit(event_id="evt-crash-1", login=login)
    async with desk.router():
        (case,) = await desk.wait_cases(1)
        await wait_for(desk.settled)
    assert case["case_id"] == case_id, "the case keeps the id its claim promised"


async def test_crash_between_case_and_ack_makes_no_second_case(desk: Desk) -> None:
    login = await desk.account("acct-crash-2")
    case_id = ids.case_id()
    claimed = clock.now_ms() - 5000
    await RouteClaim(
        event_id="evt-crash-2", case_id=case_id, now=claimed, ttl_ms=24 * HOUR_MS, stale_ms=1000
    ).run(desk.redis)
    await cases.write_case(desk.redis, {"case_id": case_id, "event_id": "evt-crash-2"}, 1000)
    await desk.submit(event_id="evt-crash-2", login=login)
    async with desk.router():
        await wait_for(desk.settled)
    assert [c["case_id"] for c in await desk.cases()] == [case_id]
    seen = await desk.redis.hgetall(router_seen("evt-crash-2"))
    assert seen["status"] == "written"
    assert await desk.redis.pttl(router_seen("evt-crash-2")) > 0


class SlowOnce(RedisDirectory):
    """The directory answers its first lookup only after ``taken_over`` is set."""

    def __init__(self, desk: Desk) -> None:
        super().__init__(desk.redis)
        self.asked = asyncio.Event()
        self.taken_over = asyncio.Event()

    async def lookup_login(self, login: str) -> Account | None:
        if not self.asked.is_set():
            self.asked.set()
            await self.taken_over.wait()
        return await super().lookup_login(login)


async def test_a_claim_taken_over_while_routing_writes_no_second_case(desk: Desk) -> None:
    """A router whose routing outlives its claim (a slow directory) and is taken over by
    another router writes nothing: the one holding the newer claim writes the case."""
    login = await desk.account("acct-slow")
    directory = SlowOnce(desk)
    await desk.submit(event_id="evt-slow", login=login)
    async with desk.router(directory):
        await asyncio.wait_for(directory.asked.wait(), timeout=10)
        # Another router, past the stale limit, takes the claim over and writes the case.
        other = await RouteClaim(
            event_id="evt-slow",
            case_id=ids.case_id(),
            now=clock.now_ms() + HOUR_MS,
            ttl_ms=24 * HOUR_MS,
            stale_ms=1000,
        ).run(desk.redis)
        entry = await cases.write_case(
            desk.redis, {"case_id": other.case_id, "event_id": "evt-slow"}, 1000
        )
        await cases.mark_written(desk.redis, "evt-slow", entry, HOUR_MS)
        directory.taken_over.set()
        await wait_for(desk.settled)
    assert [c["event_id"] for c in await desk.cases()] == ["evt-slow"]


async def test_a_claim_in_progress_elsewhere_is_left_alone(desk: Desk) -> None:
    login = await desk.account("acct-busy")
    await RouteClaim(
        event_id="evt-busy",
        case_id=ids.case_id(),
        now=clock.now_ms(),
        ttl_ms=HOUR_MS,
        stale_ms=1000,
    ).run(desk.redis)
    await desk.submit(event_id="evt-busy", login=login)
    async with desk.router(claim_idle_seconds=60):
        await wait_for(lambda: _pending(desk, 1))
    assert await desk.cases() == []


async def _pending(desk: Desk, count: int) -> bool:
    """``count`` forms waiting for a retry, each taken out of the inbound stream already."""
    in_stream = await desk.redis.xlen(CONTACT_FORMS)
    return in_stream == 0 and await desk.redis.zcard(ROUTER_RETRY) == count


async def test_malformed_events_are_dead_lettered_and_the_router_keeps_going(desk: Desk) -> None:
    login = await desk.account("acct-after")
    before = sample("resetgate_contact_forms_dead_lettered_total", reason="missing_identity")
    free_text = "my email is player@example.com and my password is hunter2"
    await desk.submit(event_id="", login="someone@example.com", message=free_text)
    await desk.submit(event_id="evt-x", topic="../etc", login="someone@example.com")
    await desk.submit(event_id="evt-y", topic="password_reset", message=free_text)
    await desk.submit(event_id="evt-z", login="x" * 1000)
    await desk.submit(event_id="evt-ok", login=login)
    async with desk.router():
        await wait_for(desk.settled)
    dead = await desk.dead()
    assert [d["reason"] for d in dead] == [
        "missing_event_id",
        "bad_topic",
        "missing_identity",
        "field_too_long",
    ]
    for record in dead:
        text = str(record)
        assert "@" not in text and "hunter2" not in text and "someone" not in text
        assert "login" in record["fields"] or "message" in record["fields"]
    assert [c["event_id"] for c in await desk.cases()] == ["evt-ok"]
    assert (
        sample("resetgate_contact_forms_dead_lettered_total", reason="missing_identity")
        == before + 1
    )


async def test_directory_outage_leaves_the_event_pending_not_dead(desk: Desk) -> None:
    await desk.submit(event_id="evt-outage", login="someone")
    async with ClientSession() as session:
        unreachable = HttpDirectory(session, "http://127.0.0.1:9", 0.5)
        async with desk.router(directory=unreachable, claim_idle_seconds=60):
            await wait_for(lambda: _pending(desk, 1))
    assert await desk.cases() == [] and await desk.dead() == []


class BuggyDirectory:
    """A directory that trips over one login (a bug, not an outage)."""

    async def lookup_login(self, login: str) -> Account | None:
        if login == "boom":
            raise KeyError("unforeseen")
        return await self.inner.lookup_login(login)

    async def get_account(self, account_id: str) -> Account | None:
        return await self.inner.get_account(account_id)

    def __init__(self, inner: RedisDirectory) -> None:
        self.inner = inner


async def test_a_form_that_trips_a_bug_is_parked_and_the_router_keeps_going(desk: Desk) -> None:
    login = await desk.account("acct-after-bug")
    await desk.submit(event_id="evt-boom", login="boom")
    await desk.submit(event_id="evt-fine", login=login)
    async with desk.router(directory=BuggyDirectory(RedisDirectory(desk.redis))):
        await wait_for(desk.settled)
    assert [d["reason"] for d in await desk.dead()] == ["routing_error"]
    assert [c["event_id"] for c in await desk.cases()] == ["evt-fine"]

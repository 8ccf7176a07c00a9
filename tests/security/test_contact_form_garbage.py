"""Contact-form events with garbage fields, fed to a real router process: each one is
dead-lettered with a reason (or, for a well-formed unknown topic, routed to the general queue),
the router keeps going, and no free text, login or address is copied anywhere."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from redis.asyncio import Redis, RedisCluster

from services.ctl.embedded import RedisServer
from services.router.app import build_router
from services.router.worker import ensure_group
from shared.directory import RedisDirectory
from shared.keys import CONTACT_FORMS, CONTACT_FORMS_DEAD, ROUTER_GROUP, SUPPORT_CASES
from tests.router.conftest import router_settings
from tests.security.conftest import add_accounts
from tests.support.processes import Processes
from tests.support.redis_cluster import RedisClusterServers

SECRET = "hunter2"  # free text a player might type into any field
FREE_TEXT = f"my password is {SECRET}, call me on +1 555 0100 or at me@example.com"
MIB = 1024 * 1024
ROUTER_ENV = {"RESETGATE_CLAIM_IDLE_SECONDS": "2", "RESETGATE_BLOCK_MS": "100"}


def form(event_id: bytes | str, **fields: bytes | str) -> dict[bytes | str, bytes | str]:
    return {"event_id": event_id, "topic": "password_reset", **fields}


# (what is wrong, the entry, the dead-letter reason)
GARBAGE: list[tuple[str, dict[Any, Any], str]] = [
    ("binary event id", form(b"\xff\xfe\x00evt"), "not_utf8"),
    ("binary login", form("evt-bin-login", login=b"\xc3\x28player"), "not_utf8"),
    ("binary topic", {"event_id": "evt-bin-topic", "topic": b"\x80\x81"}, "not_utf8"),
    ("nothing but free text", {"message": FREE_TEXT}, "missing_event_id"),
    ("free text as event id", form(FREE_TEXT, login="x"), "bad_event_id"),
    ("free text as topic", {"event_id": "evt-text-topic", "topic": FREE_TEXT}, "bad_topic"),
    ("event id with spaces", form("evt 1", login="x"), "bad_event_id"),
    ("topic not a word", {"event_id": "evt-json-topic", "topic": '{"a": 1}'}, "bad_topic"),
    ("empty topic", {"event_id": "evt-no-topic", "topic": "  "}, "missing_topic"),
    ("no identity", form("evt-no-identity", message=FREE_TEXT), "missing_identity"),
    ("huge login", form("evt-huge-login", login="a" * MIB), "field_too_long"),
    ("huge event id", form("e" * MIB, login="x"), "field_too_long"),
    ("free text as a field name", {"event_id": "evt-name", FREE_TEXT: "1"}, "missing_topic"),
]


async def test_garbage_forms_are_dead_lettered_and_the_router_keeps_going(
    redis: Redis, redis_server: RedisServer, stack: Processes
) -> None:
    ((login, account_id),) = await add_accounts(redis, 1, prefix="form")
    raw = Redis.from_url(redis_server.url)  # bytes in, bytes out: binary fields as sent
    try:
        for _, entry, _ in GARBAGE:
            await raw.xadd(CONTACT_FORMS, entry)
        # Well-formed, but carrying free text where it does not belong: routed, not copied.
        await raw.xadd(CONTACT_FORMS, form("evt-huge-message", login=login, message="x" * MIB))
        await raw.xadd(
            CONTACT_FORMS,
            {
                "event_id": "evt-general",
                "topic": "billing",
                "account_id": FREE_TEXT,
                "message": FREE_TEXT,
            },
        )
        await raw.xadd(CONTACT_FORMS, form("evt-odd-time", login=login, submitted_at=FREE_TEXT))
        # A digit to str.isdigit() that int() refuses: once a ValueError that stopped the router.
        await raw.xadd(CONTACT_FORMS, form("evt-odd-digit", login=login, submitted_at="²"))
        await raw.xadd(CONTACT_FORMS, form("evt-last", login=login))
    finally:
        await raw.aclose()
    router = await stack.start("router", **ROUTER_ENV)
    pid = router.process.pid if router.process else None

    cases = await _wait_cases(redis, 5)
    dead = [fields for _, fields in await redis.xrange(CONTACT_FORMS_DEAD)]
    assert [d["reason"] for d in dead] == [reason for *_, reason in GARBAGE]
    by_event = {c["event_id"]: c for c in cases}
    assert set(by_event) == {
        "evt-huge-message",
        "evt-general",
        "evt-odd-time",
        "evt-odd-digit",
        "evt-last",
    }
    assert by_event["evt-general"]["queue"] == "general"
    assert by_event["evt-general"]["account_id"] == ""  # free text is not an account id
    assert by_event["evt-last"]["account_id"] == account_id
    assert router.running and router.process is not None and router.process.pid == pid
    assert await _settled(redis)

    text = repr(dead) + repr(cases) + router.logs()
    for leaked in (SECRET, "555 0100", "@", "player", login, "a" * 300, "x" * 300):
        assert leaked not in text, leaked
    for label in {reason for *_, reason in GARBAGE}:
        assert await router.metric("resetgate_contact_forms_dead_lettered_total", reason=label)


async def _wait_cases(redis: Redis, count: int, timeout: float = 30) -> list[dict[str, str]]:
    async with asyncio.timeout(timeout):
        while True:
            cases = [fields for _, fields in await redis.xrange(SUPPORT_CASES)]
            if len(cases) >= count:
                return cases
            await asyncio.sleep(0.05)


async def _settled(redis: Redis) -> bool:
    (group,) = await redis.xinfo_groups(CONTACT_FORMS)
    assert group["name"] == ROUTER_GROUP
    return int(group["pending"]) == 0 and int(group.get("lag") or 0) == 0


@pytest.mark.cluster
async def test_undecoded_reads_work_on_a_cluster(
    cluster_client: RedisCluster, redis_cluster: RedisClusterServers
) -> None:
    """The router reads contact forms with NEVER_DECODE; a Cluster must route those reads."""
    raw = RedisCluster.from_url(redis_cluster.url)
    try:
        await raw.xadd(CONTACT_FORMS, {"event_id": b"\xff", "topic": "password_reset"})
        await raw.xadd(CONTACT_FORMS, {"event_id": "evt-cluster", "topic": "billing"})
    finally:
        await raw.aclose()
    settings = router_settings(redis_cluster.url, redis_cluster=True)
    await ensure_group(cluster_client)
    router = build_router(settings, cluster_client, RedisDirectory(cluster_client))
    assert await router.read_step() == 0.0
    await cluster_client.xadd(CONTACT_FORMS, {"event_id": "evt-claimed", "topic": "billing"})
    await cluster_client.xreadgroup(ROUTER_GROUP, "dead-router", {CONTACT_FORMS: ">"})
    await asyncio.sleep(1.1)  # claim_idle_seconds=1 in router_settings
    await router.claim_step()
    dead = [f["reason"] for _, f in await cluster_client.xrange(CONTACT_FORMS_DEAD)]
    cases = [f["event_id"] for _, f in await cluster_client.xrange(SUPPORT_CASES)]
    assert (dead, cases) == (["not_utf8"], ["evt-cluster", "evt-claimed"])

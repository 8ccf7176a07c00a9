"""shared/consumer.py against a real Redis: the group reader the sender and the router share."""

from __future__ import annotations

from typing import Any

import pytest
from redis.exceptions import ResponseError

from shared.consumer import StreamConsumer, decode_fields

STREAM = "test:{consumer}:stream"
GROUP = "readers"


def reader(redis: Any, name: str = "reader-1") -> StreamConsumer:
    return StreamConsumer(redis, STREAM, GROUP, name)


async def test_the_group_is_created_once_and_an_existing_one_is_kept(redis: Any) -> None:
    first, again = reader(redis), reader(redis, "reader-2")
    assert await first.ensure_group() is True
    await redis.xadd(STREAM, {"n": "1"})
    await first.read(10)
    assert await again.ensure_group() is False  # BUSYGROUP: the group and its progress stay
    [group] = await redis.xinfo_groups(STREAM)
    assert group["name"] == GROUP and int(group["pending"]) == 1


async def test_an_error_other_than_busygroup_is_raised(redis: Any) -> None:
    await redis.set(STREAM, "not a stream")
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await reader(redis).ensure_group()


@pytest.mark.parametrize("how", ["read", "claim"])
async def test_a_group_lost_with_the_data_is_recreated_and_reading_goes_on(
    redis: Any, how: str
) -> None:
    """Redis came back empty (a restart without persistence, a flush): NOGROUP."""
    consumer = reader(redis)
    await consumer.ensure_group()
    await redis.flushall()
    if how == "read":
        assert await consumer.read(10) == []
    else:
        claimed = await consumer.claim(0, 10)
        assert claimed.entries == [] and claimed.deleted == []
    assert [g["name"] for g in await redis.xinfo_groups(STREAM)] == [GROUP]
    entry_id = await redis.xadd(STREAM, {"n": "after"})
    [entry] = await consumer.read(10)
    assert entry.entry_id == entry_id
    assert entry.fields(()) == ({"n": "after"}, None)


async def test_an_entry_that_is_not_utf8_is_read_with_its_neighbours(redis: Any) -> None:
    consumer = reader(redis)
    await consumer.ensure_group()
    await redis.xadd(STREAM, {"op": "before"})
    bad = await redis.xadd(STREAM, {"op": b"\xff\xfe", "note": b"\x80ok"})
    await redis.xadd(STREAM, {"op": "after"})
    entries = await consumer.read(10)
    assert [e.fields({"op"})[0]["op"] for e in entries] == ["before", "", "after"]
    fields, reason = entries[1].fields({"op"})
    assert entries[1].entry_id == bad and reason == "not_utf8"
    assert fields["note"] == "\ufffdok"  # not a strict field: decoded with replacement


def test_decode_fields_is_strict_only_where_asked() -> None:
    raw = {b"op": b"op-1", b"free": b"\xff"}
    assert decode_fields(raw, {"op"}) == ({"op": "op-1", "free": "\ufffd"}, None)
    assert decode_fields(raw, {"free"}) == ({"op": "op-1", "free": ""}, "not_utf8")


async def test_entries_left_pending_by_a_quiet_consumer_are_claimed(redis: Any) -> None:
    dead, alive = reader(redis, "dead"), reader(redis, "alive")
    await dead.ensure_group()
    ids = [await redis.xadd(STREAM, {"n": str(n), "raw": b"\xff"}) for n in range(3)]
    await dead.read(10)
    assert (await alive.claim(60_000, 10)).entries == []  # not idle long enough
    claimed = await alive.claim(0, 2)
    assert [e.entry_id for e in claimed.entries] == ids[:2]
    pending = await redis.xpending_range(STREAM, GROUP, "-", "+", 10)
    assert {p["message_id"]: p["consumer"] for p in pending} == {
        ids[0]: "alive",
        ids[1]: "alive",
        ids[2]: "dead",
    }


async def test_ack_and_delete_leaves_neither_the_entry_nor_its_pending_record(
    redis: Any,
) -> None:
    consumer = reader(redis)
    await consumer.ensure_group()
    ids = [await redis.xadd(STREAM, {"n": str(n)}) for n in range(3)]
    await consumer.read(10)
    await consumer.ack_and_delete(ids[0], ids[2])
    await consumer.ack_and_delete()  # nothing to do
    assert [entry_id for entry_id, _ in await redis.xrange(STREAM)] == [ids[1]]
    pending = await redis.xpending_range(STREAM, GROUP, "-", "+", 10)
    assert [p["message_id"] for p in pending] == [ids[1]]

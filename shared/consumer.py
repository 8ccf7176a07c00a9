"""One reader of a Redis Streams consumer group: what the sender and the router share.

- The group is created at start from the stream's beginning (``BUSYGROUP``: it is there).
- A read or a claim that finds no group (``NOGROUP``: Redis came back without its data,
  after a restart without persistence, a failover to an empty replica or a flush) re-creates
  it and returns nothing this time; left alone, the stream would never be read again.
- Entries are read undecoded and decoded one by one (:func:`decode_fields`): with the
  client's decoding, one entry that is not UTF-8 raised in the read itself, on every retry,
  and stalled every entry after it (the router's crash loop on a contact form).
- :meth:`StreamConsumer.claim` takes over entries another consumer left pending (it died,
  or gave up on them) for longer than an idle time, with ``XAUTOCLAIM``.
- An entry done with is acknowledged and deleted in one transaction (one key, so fine on
  Cluster): a delivered entry is never read again, and what it carried does not stay.

The sender acknowledges a finished send inside its Lua scripts (finalise_attempt.lua, with
the operation's state); this module is the reading side and the drop of a bad entry.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from redis.client import NEVER_DECODE
from redis.exceptions import ResponseError

from shared.logging import event
from shared.redis import RedisClient

log = logging.getLogger(__name__)

_UNDECODED = {NEVER_DECODE: True}
RawFields = Mapping[Any, Any]  # field name -> value, as bytes (or str from a test's client)


@dataclass(frozen=True, slots=True)
class Entry:
    """A stream entry as read: its id, and its fields undecoded (see :func:`decode_fields`)."""

    entry_id: str
    raw: RawFields

    def fields(self, strict: Collection[str]) -> tuple[dict[str, str], str | None]:
        return decode_fields(self.raw, strict)


@dataclass(frozen=True, slots=True)
class Claimed:
    """What one ``XAUTOCLAIM`` took over: entries to handle, and ids of entries deleted
    while pending (Redis 6.2 returns them without fields; 7 drops them itself)."""

    entries: list[Entry] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)


def error_code(error: ResponseError) -> str:
    """The error's code, the first word of a Redis error reply (``BUSYGROUP``, ``NOGROUP``)."""
    text = str(error)
    return text.split(" ", 1)[0] if text else ""


def decode_fields(raw: RawFields, strict: Collection[str]) -> tuple[dict[str, str], str | None]:
    """An entry's fields as text; with "not_utf8" when a field in ``strict`` is not UTF-8
    (that field then reads as ""). Other fields are decoded with replacement: a reader
    that never uses them must not refuse an entry for their bytes."""
    fields: dict[str, str] = {}
    reason = None
    for key, value in raw.items():
        name = _text(key, strict=False)
        try:
            fields[name] = _text(value, strict=name in strict)
        except UnicodeDecodeError:
            fields[name] = ""
            reason = "not_utf8"
    return fields, reason


def _text(value: Any, *, strict: bool) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "strict" if strict else "replace")
    return str(value)


def _entry_id(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class StreamConsumer:
    """``consumer`` in ``group`` on ``stream``."""

    def __init__(self, client: RedisClient, stream: str, group: str, consumer: str) -> None:
        self.client = client
        self.stream = stream
        self.group = group
        self.consumer = consumer

    async def ensure_group(self) -> bool:
        """Create the group (and the stream) unless it exists; True if it was created."""
        try:
            await self.client.xgroup_create(self.stream, self.group, id="0", mkstream=True)
        except ResponseError as error:
            if error_code(error) != "BUSYGROUP":
                raise
            return False
        return True

    async def read(self, count: int, block_ms: int | None = None) -> list[Entry]:
        """Up to ``count`` entries never delivered to the group; waits up to ``block_ms`` on
        an empty stream (None: does not wait)."""
        wait: list[str | int] = ["BLOCK", block_ms] if block_ms is not None else []
        try:
            reply: Any = await self.client.execute_command(
                "XREADGROUP",
                "GROUP",
                self.group,
                self.consumer,
                "COUNT",
                count,
                *wait,
                "STREAMS",
                self.stream,
                ">",
                **_UNDECODED,
            )
        except ResponseError as error:
            await self._recover(error)
            return []
        return [Entry(_entry_id(i), f) for _, entries in reply or [] for i, f in entries]

    async def claim(self, idle_ms: int, count: int) -> Claimed:
        """Take over up to ``count`` entries pending for longer than ``idle_ms``."""
        try:
            reply: Any = await self.client.execute_command(
                "XAUTOCLAIM",
                self.stream,
                self.group,
                self.consumer,
                idle_ms,
                "0-0",
                "COUNT",
                count,
                **_UNDECODED,
            )
        except ResponseError as error:
            await self._recover(error)
            return Claimed()
        claimed = Claimed()
        for entry_id, fields in reply[1]:
            if fields:
                claimed.entries.append(Entry(_entry_id(entry_id), fields))
            elif entry_id is not None:
                claimed.deleted.append(_entry_id(entry_id))
        return claimed

    async def ack_and_delete(self, *entry_ids: str) -> None:
        """Done with these entries: acknowledged and deleted, in one transaction."""
        if not entry_ids:
            return
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.xack(self.stream, self.group, *entry_ids)
            pipe.xdel(self.stream, *entry_ids)
            await pipe.execute()

    async def _recover(self, error: ResponseError) -> None:
        if error_code(error) != "NOGROUP":
            raise error
        await self.ensure_group()
        event(
            log, logging.WARNING, "consumer group re-created", stream=self.stream, group=self.group
        )

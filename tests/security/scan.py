"""Looking for what must never be at rest (invariant 8): email addresses, reset tokens, reset
URLs, and the deployment's secrets, in log text, metrics pages and every Redis key."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families
from redis.asyncio import Redis

from shared import keys

EMAIL = re.compile(r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}")
# Any 43-character base64url run on its own: the shape of every derived token (HMAC-SHA256).
TOKEN_SHAPE = re.compile(r"(?<![A-Za-z0-9_\-])[A-Za-z0-9_\-]{43}(?![A-Za-z0-9_\-])")
URL = re.compile(r"https?://|reset-password|[?&]token=")
PATTERNS = {"address": EMAIL, "token-shaped": TOKEN_SHAPE, "url": URL}

# The account directory stand-in (login -> account -> address) is the studio's directory,
# which resetgate reads but does not own: addresses are expected there and nowhere else.
DIRECTORY_PREFIX = keys.DIRECTORY_PREFIX.encode()


@dataclass(frozen=True)
class Finding:
    where: str
    what: str
    excerpt: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what} in ...{self.excerpt}..."


def scan(
    where: str, text: str, literals: dict[str, Iterable[str]], shape_text: str | None = None
) -> list[Finding]:
    """Every pattern match and every literal occurrence in ``text`` (the token shape is looked
    for in ``shape_text`` instead when given: metric names are 43-letter words too)."""
    found = []
    for what, pattern in PATTERNS.items():
        if pattern is TOKEN_SHAPE and shape_text is not None:
            found += [
                Finding(where, what, _excerpt(shape_text, m.start(), m.end()))
                for m in pattern.finditer(shape_text)
            ]
            continue
        for match in pattern.finditer(text):
            found.append(Finding(where, what, _excerpt(text, match.start(), match.end())))
    for what, values in literals.items():
        for value in values:
            at = text.find(value)
            if value and at >= 0:
                found.append(Finding(where, what, _excerpt(text, at, at + len(value))))
    return found


def metric_data(text: str) -> str:
    """What a /metrics page carries beyond the code's own names: label values and samples."""
    values = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values += [*sample.labels.values(), str(sample.value)]
    return "\n".join(values)


def _excerpt(text: str, start: int, end: int) -> str:
    return text[max(0, start - 40) : end + 10].replace("\n", " ")


async def redis_contents(client: Redis) -> AsyncIterator[tuple[str, str]]:
    """(key, everything it holds as text) for every key but the directory's; ``client`` must
    not decode, so binary content is seen as it is. Besides what the commands read, each
    key's ``DUMP``: the bytes an RDB file, an AOF rewrite or a replica gets, which hold what
    a read no longer shows (a stream entry deleted with XDEL stays in its node until every
    entry of the node is gone). Call it under :func:`uncompressed_dumps`."""
    async for raw_key in client.scan_iter(count=1000):
        if raw_key.startswith(DIRECTORY_PREFIX):
            continue
        kind = (await client.type(raw_key)).decode()
        if kind == "none":  # expired (an IP limit key) between SCAN and TYPE
            continue
        parts: list[object] = [kind]
        if kind == "string":
            parts.append(await client.get(raw_key))
        elif kind == "hash":
            parts.append(await client.hgetall(raw_key))
        elif kind == "list":
            parts.append(await client.lrange(raw_key, 0, -1))
        elif kind == "set":
            parts.append(await client.smembers(raw_key))
        elif kind == "zset":
            parts.append(await client.zrange(raw_key, 0, -1, withscores=True))
        elif kind == "stream":
            parts.append(await client.xrange(raw_key))
            parts.append(await _stream_groups(client, raw_key))
        else:
            raise AssertionError(f"unexpected type {kind} at {raw_key!r}")
        parts.append(await client.dump(raw_key) or b"")
        yield raw_key.decode(errors="replace"), _text(parts)


@asynccontextmanager
async def uncompressed_dumps(client: Redis) -> AsyncIterator[None]:
    """DUMP compresses long values (LZF) as RDB does, which would hide text from a byte
    search; with rdbcompression off, a listpack's strings appear as they are."""
    [before] = (await client.config_get("rdbcompression")).values()
    await client.config_set("rdbcompression", "no")
    try:
        yield
    finally:
        await client.config_set("rdbcompression", before)


async def _stream_groups(client: Redis, key: bytes) -> list[object]:
    """Consumer groups and their consumers' names: names are data too."""
    groups: list[object] = []
    for group in await client.xinfo_groups(key):
        groups.append(group)
        groups.append(await client.xinfo_consumers(key, group["name"]))
    return groups


def _text(value: object) -> str:
    """A readable flattening (bytes decoded) that keeps every byte's content searchable."""
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, dict):
        return " ".join(f"{_text(k)}={_text(v)}" for k, v in value.items())
    if isinstance(value, list | tuple | set):
        return " ".join(_text(v) for v in value)
    return str(value)

"""What a progressive switch and the failover policy watch, read from the store alone: which
operations of a partition were accepted (and by which provider) since the last look, a
provider's 429s, and each partition's oldest eligible operation.

Acceptances are found as departures from the partition's live index (an operation leaves
it when it ends): no counter on the send path, so the sender's attempt is untouched. A
watcher keeps what it saw last in memory; a new watcher (another driver after a crash)
starts from what it sees first, which only delays a verdict, never hurries one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shared import operation_views
from shared.clock import to_ms
from shared.keys import PartitionKeys, provider_pacing
from shared.model import State
from shared.redis import RedisClient


@dataclass(slots=True)
class Departures:
    """Per partition, the live operations seen at the last look."""

    seen: dict[int, set[str]] = field(default_factory=dict)

    async def accepted(self, client: RedisClient, partitions: list[int]) -> dict[int, list[str]]:
        """Per partition, the provider of each operation accepted since the last look (a
        partition looked at for the first time reports none)."""
        async with client.pipeline(transaction=False) as pipe:
            for p in partitions:
                pipe.zrange(PartitionKeys(p).live, 0, -1)
            lives = [{str(m) for m in members} for members in await pipe.execute()]
        gone: list[tuple[int, str]] = []
        for p, live in zip(partitions, lives, strict=True):
            gone += [(p, op) for op in self.seen.get(p, set()) - live]
            self.seen[p] = live
        found: dict[int, list[str]] = {p: [] for p in partitions}
        if not gone:
            return found
        async with client.pipeline(transaction=False) as pipe:
            for p, op in gone:
                pipe.hmget(PartitionKeys(p).operation(op), "state", "provider")
            fields = await pipe.execute()
        for (p, _), (state, provider) in zip(gone, fields, strict=True):
            if state == State.ACCEPTED:
                found[p].append(str(provider or ""))
        return found


async def throttled_total(client: RedisClient, provider: str) -> int:
    """The 429s the pacer has counted for ``provider`` since the store began."""
    raw = await client.hget(provider_pacing(provider), "throttled_total")
    try:
        return int(float(raw or 0))
    except ValueError:
        return 0


async def eligible(client: RedisClient, partitions: list[int], now_ms: int) -> int:
    """Operations of ``partitions`` a sender may send now: their send jobs (unread or read
    and not finished) and those due by now (not those deferred until later)."""
    async with client.pipeline(transaction=False) as pipe:
        for p in partitions:
            pipe.xlen(PartitionKeys(p).send)
            pipe.zcount(PartitionKeys(p).due, "-inf", now_ms)
        return int(sum(await pipe.execute()))


async def oldest_ages_ms(client: RedisClient, partitions: int, now_ms: int) -> dict[int, int]:
    """Each partition's oldest eligible operation's age (ms), 0 where it has none: the
    same reading as on-call's views (shared.operation_views)."""
    rows = await operation_views.oldest_per_partition(client, partitions, 1, now_ms)
    return {p: to_ms(row["age_seconds"]) if row else 0 for p, row in enumerate(rows)}


@dataclass(slots=True)
class StepWatch:
    """One step's window: what the new provider did for the moved partitions."""

    to: str
    started_at: int
    throttled_at_start: int
    eligible_at_start: int = 0  # operations of the moved partitions sendable then
    departures: Departures = field(default_factory=Departures)
    accepted: int = 0  # operations of the moved partitions the new provider accepted

    async def sample(self, client: RedisClient, moved: list[int]) -> None:
        found = await self.departures.accepted(client, moved)
        self.accepted += sum(1 for names in found.values() for n in names if n == self.to)

    async def throttled(self, client: RedisClient) -> int:
        return await throttled_total(client, self.to) - self.throttled_at_start

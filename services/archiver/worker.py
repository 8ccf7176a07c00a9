"""The archiver's loops: read settled operations from every partition's stream (group
``archivers``, shared by the replicas), write each batch to PostgreSQL in one transaction,
then let Redis expire them after the tail (mark_archived.lua), then acknowledge. A crash at
any point leaves the entries pending: another replica (or this one, restarted) takes them
over after an idle time and writes them again, which the archive ignores (ON CONFLICT)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime

import asyncpg

from services.archiver import related, rows
from services.archiver.settings import ArchiverSettings
from shared import archive_schema as schema
from shared import clock, metrics
from shared.archive import ARCHIVE_ERRORS
from shared.clock import to_datetime
from shared.consumer import Entry, StreamConsumer
from shared.ids import operation_created_ms
from shared.keys import ARCHIVE_GROUP, JOB_FIELD, PartitionKeys
from shared.logging import event
from shared.model import TERMINAL
from shared.redis import RedisClient
from shared.scripts.archive import MarkArchived, Marked

log = logging.getLogger(__name__)
LAG_INTERVAL_S = 5.0
BACKOFF_MAX_S = 5.0


@dataclass(slots=True)
class Pending:
    """Entries read and not yet acknowledged, by partition; operation id -> partition."""

    entries: dict[int, list[str]] = field(default_factory=dict)
    operations: dict[str, int] = field(default_factory=dict)

    def add(self, partition: int, entry: Entry) -> None:
        self.entries.setdefault(partition, []).append(entry.entry_id)
        fields, _ = entry.fields(strict=(JOB_FIELD,))
        if operation_id := fields.get(JOB_FIELD):
            self.operations[operation_id] = partition

    def __len__(self) -> int:
        return sum(len(ids) for ids in self.entries.values())


class Archiver:
    def __init__(self, settings: ArchiverSettings, client: RedisClient, pool: asyncpg.Pool):
        self.settings = settings
        self.client = client
        self.pool = pool
        self.consumers = [
            StreamConsumer(client, PartitionKeys(p).settled, ARCHIVE_GROUP, settings.consumer_name)
            for p in range(settings.partitions)
        ]
        self.held = Pending()  # a batch whose write failed, tried again before anything new
        self.months: set[datetime] = set()
        self.backoff = 0.0

    async def ensure_groups(self) -> None:
        for consumer in self.consumers:
            await consumer.ensure_group()

    async def archive_step(self) -> float:
        """Archive one batch; returns how long to wait before the next."""
        batch = self.held if len(self.held) else await self._read()
        if not len(batch):
            return self.settings.archive_poll_seconds
        self.held = batch
        if not await self._guarded(batch):
            return self.backoff
        self.held = Pending()
        return 0.0

    async def claim_step(self) -> float:
        """Take over what a dead archiver left pending, and archive it."""
        batch = Pending()
        for p, consumer in enumerate(self.consumers):
            claimed = await consumer.claim(
                self.settings.archive_claim_idle_ms, self.settings.archive_batch
            )
            for entry in claimed.entries:
                batch.add(p, entry)
            await consumer.ack_and_delete(*claimed.deleted)
        if len(batch):
            await self._guarded(batch)
        return self.settings.archive_claim_idle_seconds / 2

    async def lag_step(self) -> float:
        """The age of the oldest entry still on a settled stream (acknowledged ones are
        deleted, so the first entry is the oldest not archived)."""
        pipe = self.client.pipeline(transaction=False)
        for consumer in self.consumers:
            pipe.xrange(consumer.stream, "-", "+", count=1)
        heads = await pipe.execute()
        oldest = min((int(str(h[0][0]).split("-")[0]) for h in heads if h), default=None)
        lag = 0.0 if oldest is None else max(0.0, clock.to_seconds(clock.now_ms() - oldest))
        metrics.archive_lag.set(lag)
        return LAG_INTERVAL_S

    async def prune_step(self) -> float:
        """Partitions for this month and the next; drop those past retention."""
        now = datetime.now(UTC)
        try:
            async with self.pool.acquire() as conn:
                month = schema.month_of(now)
                for m in (month, schema.next_month(month)):
                    await schema.ensure_month(conn, m)
                    self.months.add(m)
                dropped = await schema.drop_expired(conn, self.settings.archive_retention_days, now)
        except ARCHIVE_ERRORS as error:
            self._down(error)
            return min(self.settings.archive_prune_interval_seconds, BACKOFF_MAX_S)
        for name in dropped:
            metrics.archive_partitions_dropped.inc()
            event(log, logging.INFO, "archive partition dropped past retention", partition=name)
        return self.settings.archive_prune_interval_seconds

    async def _read(self) -> Pending:
        batch = Pending()
        for p, consumer in enumerate(self.consumers):
            room = self.settings.archive_batch - len(batch)
            if room <= 0:
                break
            for entry in await consumer.read(room):
                batch.add(p, entry)
        return batch

    async def _guarded(self, batch: Pending) -> bool:
        """Archive ``batch``; False (and the archive marked down) if PostgreSQL failed."""
        try:
            await self.archive(batch)
        except ARCHIVE_ERRORS as error:
            self._down(error)
            return False
        metrics.archive_up.set(1)
        self.backoff = 0.0
        return True

    def _down(self, error: BaseException) -> None:
        metrics.archive_up.set(0)
        self.backoff = min(max(self.backoff * 2, 0.2), BACKOFF_MAX_S)
        event(
            log,
            logging.WARNING,
            "archive write failed; keeping the batch and retrying",
            error=type(error).__name__,
            retry_in_s=self.backoff,
        )

    async def archive(self, batch: Pending) -> None:
        """Read, write and commit, mark, then acknowledge: in that order."""
        found = await self._read_operations(batch.operations)
        written = rows.Batch()
        for operation_id, (raw, ledger) in found.items():
            written.add(operation_id, raw, ledger)
        await self._add_related(written, found)
        async with self.pool.acquire() as conn:
            for month in {schema.month_of(at) for at in written.months()} - self.months:
                await schema.ensure_month(conn, month)
                self.months.add(month)
            await rows.write(conn, written)
        await self._mark(found)
        for p, entry_ids in batch.entries.items():
            await self.consumers[p].ack_and_delete(*entry_ids)
        skipped = len(batch.operations) - len(found)
        metrics.archived_operations.labels("written").inc(len(found))
        metrics.archived_operations.labels("skipped").inc(skipped)

    async def _read_operations(
        self, operations: dict[str, int]
    ) -> dict[str, tuple[dict[str, str], list[str]]]:
        """operation id -> (hash, ledger rows) of those settled for the archive; one that is
        gone or live again (a settlement of its own will follow) is left out."""
        pipe = self.client.pipeline(transaction=False)
        for operation_id, p in operations.items():
            keys = PartitionKeys(p)
            pipe.hgetall(keys.operation(operation_id))
            pipe.lrange(keys.attempts(operation_id), 0, -1)
        replies = iter(await pipe.execute())
        found = {}
        for operation_id in operations:
            raw, ledger = next(replies), next(replies)
            if raw.get("settled_at") and raw.get("state") in {str(s) for s in TERMINAL}:
                found[operation_id] = (raw, list(ledger))
        return found

    async def _add_related(
        self, written: rows.Batch, found: dict[str, tuple[dict[str, str], list[str]]]
    ) -> None:
        if not found:
            return
        settled = {op: to_datetime(int(raw["settled_at"])) for op, (raw, _) in found.items()}
        since = min(operation_created_ms(op) for op in found)
        for table, reader in (
            ("operator_actions", related.operator_actions),
            ("support_cases", related.support_cases),
        ):
            for operation_id, entries in (await reader(self.client, found, since)).items():
                for entry_id, fields in entries:
                    written.add_related(
                        table, settled[operation_id], operation_id, entry_id, fields
                    )

    async def _mark(self, found: dict[str, tuple[dict[str, str], list[str]]]) -> None:
        now = clock.now_ms()
        requests = [
            MarkArchived(
                operation_id=op,
                now=now,
                tail_ms=self.settings.archive_tail_ms,
                settled_at=raw["settled_at"],
                delivery_event_at=raw.get("delivery_event_at", ""),
                account_id=raw["account_id"],
            )
            for op, (raw, _) in found.items()
        ]
        if not requests:
            return
        replies = await MarkArchived.SCRIPT.many(self.client, [r.call() for r in requests])
        for request, reply in zip(requests, replies, strict=True):
            marked = request.decode(reply)
            if marked is not Marked.ARCHIVED:
                metrics.archived_operations.labels(str(marked)).inc()

"""The sender's intake: send jobs from the partitions' streams to the attempt workers.

It reads new entries (XREADGROUP) and takes over a quiet consumer's (XAUTOCLAIM) only as
far as its :class:`Capacity` allows, queues each job for the workers, keeps the entry of
every job it has taken from going idle (so no other sender takes it over while it waits
its turn), and gives back to the group what was not started: a job a worker hands back,
and at shutdown everything still queued. A worker only takes a job, runs its attempt and
says when it is finished.

Every loop logs and continues on Redis trouble (with a capped backoff) and returns soon
after ``stop`` is set. The queue is bounded by the capacity, not by itself: a reader never
waits with entries in hand, and a slow provider pushes back on the readers instead of
growing memory.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext

from services.sender import traced
from services.sender.capacity import Capacity
from services.sender.job import Job
from services.sender.settings import SenderSettings
from shared import clock
from shared.clock import to_seconds
from shared.consumer import Entry, StreamConsumer
from shared.keys import ACCOUNT_FIELD, JOB_FIELD, SEND_GROUP, PartitionKeys
from shared.logging import event
from shared.loops import ERRORS, Step
from shared.operations import hand_back, renew_entries
from shared.redis import RedisClient

log = logging.getLogger(__name__)
# An idle stream is waited on this long per read; shutdown waits at most this for a read.
READ_BLOCK_MS = 2000
CLAIM_BATCH = 100  # entries a claim takes over at most per round
JOB_FIELDS = (JOB_FIELD,)  # what every send job carries (an admission's adds ACCOUNT_FIELD)


async def ensure_groups(client: RedisClient, partitions: int) -> None:
    for p in range(partitions):
        await ensure_group(client, p)


async def ensure_group(client: RedisClient, partition: int) -> None:
    await send_jobs(client, partition, "").ensure_group()


def send_jobs(client: RedisClient, partition: int, consumer: str) -> StreamConsumer:
    """A partition's send stream as ``consumer`` of the senders' group reads it (undecoded:
    a job that is not UTF-8 is dropped, never a stalled partition; shared.consumer)."""
    return StreamConsumer(client, PartitionKeys(partition).send, SEND_GROUP, consumer)


class Intake:
    def __init__(
        self,
        settings: SenderSettings,
        client: RedisClient,
        readable: Callable[[int], bool],
        paused: Callable[[int], bool],
    ) -> None:
        """``readable``: whether a partition's new jobs may be read now (not paused, its
        provider here and able to send); ``paused``: whether it is paused by an operator."""
        self.settings = settings
        self.client = client
        self._readable = readable
        self._paused = paused
        self.capacity = Capacity(
            settings.concurrency + settings.partitions, low_water=settings.concurrency // 4
        )
        self._queue: asyncio.Queue[Job | None] = asyncio.Queue()
        # Every job taken (queued, waiting for a slot or in its attempt) -> when its entry's
        # idle time last restarted (read, claimed or renewed), ms.
        self.taken: dict[Job, float] = {}
        self.streams = [
            send_jobs(client, p, settings.consumer_name) for p in range(settings.partitions)
        ]
        self._readers = 0
        self.readers_done = asyncio.Event()

    # -- the workers' side -----------------------------------------------------------------
    async def next_job(self) -> Job | None:
        """The next job to attempt; None once shutdown released the workers."""
        return await self._queue.get()

    async def finished(self, job: Job) -> None:
        """``job`` is done with (attempted or handed back): its place is free again."""
        self.taken.pop(job, None)
        await self.capacity.release(1)

    async def hand_back(self, jobs: list[Job]) -> None:
        """Give ``jobs`` (not started) back to the group: another sender reads them now."""
        if not jobs:
            return
        by_partition: dict[int, list[str]] = {}
        for job in jobs:
            by_partition.setdefault(job.partition, []).append(job.entry_id)
        handed = 0
        try:
            for partition, entry_ids in by_partition.items():
                handed += await hand_back(
                    self.client, partition, self.settings.consumer_name, entry_ids
                )
        except ERRORS as error:
            # Left pending under this consumer: another sender claims them after a lease.
            event(log, logging.WARNING, "hand-back failed", error=type(error).__name__)
        event(log, logging.INFO, "unstarted jobs handed back", jobs=handed)

    # -- readers ---------------------------------------------------------------------------
    @asynccontextmanager
    async def reading(self, partition: int, stop: asyncio.Event) -> AsyncIterator[Step]:
        """A reader loop of ``partition``, counted while it runs (shutdown waits for the
        read in flight)."""
        self._readers += 1
        try:
            yield self._reader(partition, stop)
        finally:
            self._readers -= 1
            if not self._readers:
                self.readers_done.set()

    def _reader(self, partition: int, stop: asyncio.Event) -> Step:
        busy = False  # the last read found work, and perhaps left some: read a batch at once

        async def step() -> float:
            nonlocal busy
            if not self._readable(partition):
                return 0.5
            if busy:
                # A batch as soon as the low-water mark is free: one round trip for it,
                # not one per place (every reader woken would take one place each).
                places = await self.capacity.reserve(self.settings.read_batch, stop)
                got = await self._read(partition, places, block=None)
                busy = bool(got) and got == places
                return 0
            # Wait on an idle stream with one place reserved; read the rest of a batch only once
            # it has work, so idle partitions never take the places busy ones need.
            first = await self.capacity.reserve(1, stop)
            got = await self._read(partition, first, block=READ_BLOCK_MS) if first else 0
            if got == first and got:
                more = self.capacity.reserve_now(self.settings.read_batch - 1)
                busy = await self._read(partition, more, block=None) == more
            return 0

        return step

    async def _read(self, partition: int, count: int, *, block: int | None) -> int:
        """Read up to ``count`` new entries (places reserved); releases what is unused."""
        got = 0
        try:
            if count:
                got = await self._read_entries(partition, count, block)
        finally:
            await self.capacity.release(count - got)
        return got

    async def _read_entries(self, partition: int, count: int, block: int | None) -> int:
        entries = await self.streams[partition].read(count, block)
        for entry in entries:
            await self._enqueue(partition, entry)
        return len(entries)

    def claiming(self, partition: int, stop: asyncio.Event) -> AbstractAsyncContextManager[Step]:
        """A loop taking over entries whose consumer went quiet for longer than a lease."""
        lease_ms = self.settings.lease_ms

        async def step() -> float:
            if not self._paused(partition):
                await self._claim(partition, lease_ms, stop)
            return lease_ms / 2000

        return nullcontext(step)

    async def _claim(self, partition: int, lease_ms: int, stop: asyncio.Event) -> None:
        places = await self.capacity.reserve(CLAIM_BATCH, stop)
        claimed = 0
        try:
            if places:
                taken = await self.streams[partition].claim(lease_ms, places)
                for entry in taken.entries:
                    claimed += 1
                    await self._enqueue(partition, entry, taken_over=True)
        finally:
            await self.capacity.release(places - claimed)

    async def _enqueue(self, partition: int, entry: Entry, taken_over: bool = False) -> None:
        """Queue a job; an entry that names no operation of this partition is dropped."""
        fields, _ = entry.fields(JOB_FIELDS)  # a job field that is not UTF-8 reads as ""
        operation_id = fields.get(JOB_FIELD, "")
        try:
            valid = PartitionKeys.of(operation_id).partition == partition
        except ValueError:
            valid = False
        if valid:
            now = clock.now_ms()
            traceparent, tracestate, retry = traced.carried(fields)
            job = Job(
                partition,
                entry.entry_id,
                operation_id,
                traceparent,
                tracestate,
                retry,
                now,
                taken_over,
                fields.get(ACCOUNT_FIELD, ""),
            )
            self.taken[job] = now
            self._queue.put_nowait(job)
            return
        await self.capacity.release(1)
        # Nothing can ever send it; left pending it would be claimed again forever.
        await self.streams[partition].ack_and_delete(entry.entry_id)
        event(
            log,
            logging.ERROR,
            "malformed send job dropped",
            partition=partition,
            entry_id=entry.entry_id,
        )

    # -- shutdown --------------------------------------------------------------------------
    async def hand_back_on_stop(self, stop: asyncio.Event) -> None:
        """On shutdown, give every job not yet started back to the group at once (the
        other senders read it now, not after a lease), then release the idle workers."""
        await stop.wait()
        await self.capacity.wake()
        await self._hand_back_queued()
        if self._readers:
            await self.readers_done.wait()  # a read in flight may still bring entries
            await self._hand_back_queued()
        for _ in range(self.settings.concurrency):
            self._queue.put_nowait(None)

    async def _hand_back_queued(self) -> None:
        jobs = []
        while not self._queue.empty():
            job = self._queue.get_nowait()
            if job is not None:
                jobs.append(job)
                self.taken.pop(job, None)
        await self.hand_back(jobs)
        await self.capacity.release(len(jobs))

    # -- leases on taken jobs --------------------------------------------------------------
    async def renew_step(self) -> float:
        """Restart the idle time of every entry taken for a quarter lease, every quarter
        lease: behind a slow pace (SES: 1/s) a job waits its turn longer than a lease, and
        taken over as abandoned it would be queued twice, its second copy spending a pacing
        slot for nothing. Its own loop: a claim loop can wait long for places, this one must
        not."""
        quarter_ms = self.settings.lease_ms / 4
        since = clock.now_ms() - quarter_ms
        old: dict[int, list[Job]] = {}
        for job, at in self.taken.items():
            if at <= since:
                old.setdefault(job.partition, []).append(job)
        for partition, jobs in old.items():
            await self._renew(partition, jobs)
        return to_seconds(quarter_ms)

    async def _renew(self, partition: int, jobs: list[Job]) -> None:
        entry_ids = [job.entry_id for job in jobs]
        await renew_entries(self.client, partition, self.settings.consumer_name, entry_ids)
        now = clock.now_ms()
        for job in jobs:
            if job in self.taken:
                self.taken[job] = now

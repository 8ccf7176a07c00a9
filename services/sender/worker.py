"""The sender's loops: stream readers, attempt workers, lease takeover, due promoter, gauges.

Every loop logs and continues on Redis trouble (with a capped backoff) and returns soon
after ``stop`` is set; the in-memory job queue is bounded, so a slow provider pushes back
on the readers instead of growing memory.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from services.sender.attempt import AttemptRunner, Job
from services.sender.room import Room
from services.sender.settings import SenderSettings
from services.sender.unserved import Unserved
from shared import clock, control, metrics
from shared.consumer import Entry, StreamConsumer
from shared.keys import JOB_FIELD, SEND_GROUP, PartitionKeys
from shared.logging import event
from shared.loops import ERRORS, resilient
from shared.operations import hand_back, promote_due, renew_entries
from shared.redis import RedisClient
from shared.service import sleep_or_stop

log = logging.getLogger(__name__)
SERVICE = "sender"
# An idle stream is waited on this long per read; shutdown waits at most this for a read.
READ_BLOCK_MS = 2000
GAUGE_TICKS = 3  # partition gauges every third control refresh (seconds)
JOB_FIELDS = (JOB_FIELD,)  # all a send job carries (every script that enqueues one)


async def ensure_groups(client: RedisClient, partitions: int) -> None:
    for p in range(partitions):
        await ensure_group(client, p)


async def ensure_group(client: RedisClient, partition: int) -> None:
    await send_jobs(client, partition, "").ensure_group()


def send_jobs(client: RedisClient, partition: int, consumer: str) -> StreamConsumer:
    """A partition's send stream as ``consumer`` of the senders' group reads it (undecoded:
    a job that is not UTF-8 is dropped, never a stalled partition; shared.consumer)."""
    return StreamConsumer(client, PartitionKeys(partition).send, SEND_GROUP, consumer)


class Sender:
    def __init__(
        self, settings: SenderSettings, client: RedisClient, runners: list[AttemptRunner]
    ) -> None:
        """``runners``: one per configured provider; the first serves every partition the
        control record does not assign to another."""
        self.settings = settings
        self.client = client
        self.runner = runners[0]
        self.runners = {r.name: r for r in runners}
        # Bounded by the room, not by the queue: a reader never waits holding entries.
        self.jobs: asyncio.Queue[Job | None] = asyncio.Queue()
        # Every job held (queued, waiting for a slot or in its attempt) -> when its entry's
        # idle time last restarted (read, claimed or renewed), ms.
        self.held: dict[Job, float] = {}
        self.room = Room(
            settings.concurrency + settings.partitions, low_water=settings.concurrency // 4
        )
        self.state = control.ControlState(frozenset(), {})
        self.streams = [
            send_jobs(client, p, settings.consumer_name) for p in range(settings.partitions)
        ]
        self._serving: dict[int, str] = {}  # partition -> provider, as last exported
        self.unserved = Unserved(settings.partitions)
        self._readers = 0
        self.readers_done = asyncio.Event()

    # -- control -------------------------------------------------------------------------
    def runner_for(self, partition: int) -> AttemptRunner | None:
        """The partition's provider; None if this sender lacks the one it is assigned to."""
        return self.runners.get(self.state.provider_for(partition, self.runner.name))

    def sending_allowed(self, partition: int | None = None) -> bool:
        """For a partition: its provider is here and not paused by credentials; for the
        process (readiness): at least one of its providers can send."""
        if partition is None:
            return any(not r.auth_paused for r in self.runners.values())
        runner = self.runner_for(partition)
        return runner is not None and not runner.auth_paused

    async def refresh_control(self) -> float:
        self.state = await control.read(self.client)
        for runner in self.runners.values():
            await self._refresh_auth(runner)
        for p in range(self.settings.partitions):
            metrics.partition_paused.labels(str(p)).set(int(p in self.state.paused))
            self._provider_gauge(p)
        self.unserved.report(self.state, self.runner.name, frozenset(self.runners))
        metrics.redis_up.labels(SERVICE).set(1)
        return 1.0

    def _provider_gauge(self, partition: int) -> None:
        name = self.state.provider_for(partition, self.runner.name)
        old = self._serving.get(partition)
        if old is not None and old != name:
            metrics.partition_provider.remove(str(partition), old)
        self._serving[partition] = name
        metrics.partition_provider.labels(str(partition), name).set(1)

    async def _refresh_auth(self, runner: AttemptRunner) -> None:
        mine = self.state.auth_paused.get(runner.name)
        kind = control.pause_kind(mine) if mine is not None else ""
        if mine and control.pause_over(mine, clock.now_ms()):
            # A quota's window rolled over: the pause lifts by itself.
            await control.auth_resume(self.client, runner.name)
            event(log, logging.INFO, "provider pause over; sending resumes",
                  provider=runner.name, kind=kind)  # fmt: skip
            mine, kind = None, ""
        elif (
            kind == control.PauseKind.CREDENTIALS
            and mine
            and mine.get("key") != control.key_fingerprint(runner.api_key)
        ):
            # A different key has been deployed since the rejection: try again with it. (An
            # account or refusals pause is not about the key: only an operator lifts it.)
            await control.auth_resume(self.client, runner.name)
            event(log, logging.INFO, "new provider key deployed; auth pause lifted",
                  provider=runner.name)  # fmt: skip
            mine, kind = None, ""
        runner.auth_paused = mine is not None
        metrics.provider_auth_paused.labels(runner.name).set(
            int(kind == control.PauseKind.CREDENTIALS)
        )
        for each in control.PauseKind:
            metrics.provider_paused.labels(runner.name, str(each)).set(int(kind == each))

    # -- readers -------------------------------------------------------------------------
    async def read_partition(self, partition: int, stop: asyncio.Event) -> None:
        self._readers += 1
        try:
            await resilient(SERVICE, f"read:{partition}", stop, self._reader(partition, stop))
        finally:
            self._readers -= 1
            if not self._readers:
                self.readers_done.set()

    def _reader(self, partition: int, stop: asyncio.Event) -> Callable[[], Awaitable[float]]:
        async def step() -> float:
            if partition in self.state.paused or not self.sending_allowed(partition):
                return 0.5
            # Wait on an idle stream holding one place; read the rest of a batch only once
            # it has work, so idle partitions never hold the room busy ones need.
            first = await self.room.take(1, stop)
            got = await self._read(partition, first, block=READ_BLOCK_MS) if first else 0
            if got == first and got:
                more = self.room.take_now(self.settings.read_batch - 1)
                await self._read(partition, more, block=None)
            return 0

        return step

    async def _read(self, partition: int, count: int, *, block: int | None) -> int:
        """Read up to ``count`` new entries (room already taken); gives back what is unused."""
        got = 0
        try:
            if count:
                got = await self._read_entries(partition, count, block)
        finally:
            await self.room.give(count - got)
        return got

    async def _read_entries(self, partition: int, count: int, block: int | None) -> int:
        entries = await self.streams[partition].read(count, block)
        for entry in entries:
            await self._enqueue(partition, entry)
        return len(entries)

    async def claim_partition(self, partition: int, stop: asyncio.Event) -> None:
        """Take over entries whose consumer went quiet for longer than a lease."""
        lease_ms = self.settings.lease_seconds * 1000

        async def step() -> float:
            if partition in self.state.paused:
                return lease_ms / 2000
            room = await self.room.take(100, stop)
            claimed = 0
            try:
                if room:
                    taken = await self.streams[partition].claim(lease_ms, room)
                    for entry in taken.entries:
                        claimed += 1
                        await self._enqueue(partition, entry)
            finally:
                await self.room.give(room - claimed)
            return lease_ms / 2000

        await resilient(SERVICE, f"claim:{partition}", stop, step)

    async def _enqueue(self, partition: int, entry: Entry) -> None:
        """Queue a job; an entry that names no operation of this partition is dropped."""
        fields, _ = entry.fields(JOB_FIELDS)  # a job field that is not UTF-8 reads as ""
        operation_id = fields.get(JOB_FIELD, "")
        try:
            valid = PartitionKeys.of(operation_id).partition == partition
        except ValueError:
            valid = False
        if valid:
            job = Job(partition, entry.entry_id, operation_id)
            self.held[job] = clock.now_ms()
            self.jobs.put_nowait(job)
            return
        await self.room.give(1)
        # Nothing can ever send it; left pending it would be claimed again forever.
        await self.streams[partition].ack_and_delete(entry.entry_id)
        event(log, logging.ERROR, "malformed send job dropped", partition=partition,
              entry_id=entry.entry_id)  # fmt: skip

    # -- workers -------------------------------------------------------------------------
    async def work(self, stop: asyncio.Event) -> None:
        """Run attempts until shutdown; a job not started by then is handed back."""
        while (job := await self.jobs.get()) is not None:
            try:
                await self._run_one(job, stop)
            finally:
                self.held.pop(job, None)
                await self.room.give(1)

    async def _run_one(self, job: Job, stop: asyncio.Event) -> None:
        # A paused partition's job is handed back rather than held: a provider switch
        # waits until nothing of the partition is in flight.
        while not self.sending_allowed(job.partition) and not stop.is_set():
            if job.partition in self.state.paused:
                break
            await sleep_or_stop(stop, 0.5)
        try:
            owner = await self._attempt_at(self.runner_for(job.partition), job, stop)
            if owner:
                # Pinned to the provider that decided its replay (shared.ownership): sent
                # there, never through the partition's provider. Rare: after a switch only.
                event(log, logging.INFO, "operation pinned to another provider",
                      operation_id=job.operation_id, provider=owner)  # fmt: skip
                if await self._attempt_at(self.runners.get(owner), job, stop):
                    await self._hand_back([job])
        except ERRORS as error:
            event(
                log,
                logging.WARNING,
                "attempt interrupted by a store error",
                operation_id=job.operation_id,
                error=type(error).__name__,
            )
        except Exception:
            # A bug must cost this one operation (its entry stays pending and is retried
            # after a lease), never the process: a crashed sender sends nothing at all.
            log.exception(
                "attempt failed unexpectedly", extra={"fields": {"operation_id": job.operation_id}}
            )

    async def _attempt_at(self, runner: AttemptRunner | None, job: Job, stop: asyncio.Event) -> str:
        """One attempt through ``runner`` (None: handed back); "" or the provider it is
        pinned to instead."""
        # The pacing schedule lives in Redis too: a store error while waiting for a slot
        # must not escape, or this worker dies and takes the whole sender down with it.
        allowed = runner is not None and not runner.auth_paused
        slot = await runner.pacer.acquire(stop) if runner and allowed else None
        quota_at = await runner.take_quota() if runner and slot is not None else None
        if runner is None or slot is None or quota_at is None:
            await self._hand_back([job])
            return ""
        return await runner.run(job, slot, quota_at)

    # -- shutdown --------------------------------------------------------------------------
    async def hand_back_on_stop(self, stop: asyncio.Event) -> None:
        """On shutdown, give every job not yet started back to the group at once (the
        other senders read it now, not after a lease), then release the idle workers."""
        await stop.wait()
        await self.room.wake()
        await self._hand_back_queued()
        if self._readers:
            await self.readers_done.wait()  # a read in flight may still bring entries
            await self._hand_back_queued()
        for _ in range(self.settings.concurrency):
            self.jobs.put_nowait(None)

    async def _hand_back_queued(self) -> None:
        jobs = []
        while not self.jobs.empty():
            job = self.jobs.get_nowait()
            if job is not None:
                jobs.append(job)
                self.held.pop(job, None)
        await self._hand_back(jobs)
        await self.room.give(len(jobs))

    async def _hand_back(self, jobs: list[Job]) -> None:
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

    # -- leases on held jobs ----------------------------------------------------------------
    async def renew(self, stop: asyncio.Event) -> None:
        """Restart the idle time of every entry held for a quarter lease, every quarter lease:
        behind a slow pace (SES: 1/s) a job waits its turn longer than a lease, and taken over
        as abandoned it was queued twice and its second copy spent a pacing slot for nothing.
        Its own loop: a claim loop can wait long for room, this one must not."""
        quarter_ms = self.settings.lease_seconds * 1000 / 4

        async def step() -> float:
            since = clock.now_ms() - quarter_ms
            old: dict[int, list[Job]] = {}
            for job, at in self.held.items():
                if at <= since:
                    old.setdefault(job.partition, []).append(job)
            for partition, jobs in old.items():
                await self._renew(partition, jobs)
            return quarter_ms / 1000

        await resilient(SERVICE, "renew", stop, step)

    async def _renew(self, partition: int, jobs: list[Job]) -> None:
        entry_ids = [job.entry_id for job in jobs]
        await renew_entries(self.client, partition, self.settings.consumer_name, entry_ids)
        now = clock.now_ms()
        for job in jobs:
            if job in self.held:
                self.held[job] = now

    # -- scheduling and gauges -------------------------------------------------------------
    async def promote(self, stop: asyncio.Event) -> None:
        async def step() -> float:
            now = clock.now_ms()
            for p in await self._due_partitions(now):
                await promote_due(self.client, p, now)
            return self.settings.promote_interval_seconds

        await resilient(SERVICE, "promote", stop, step)

    async def _due_partitions(self, now: int) -> list[int]:
        """Partitions with work due now: one pipelined look at every due set, so an idle
        sender costs one round trip per interval, not one per partition."""
        live = [p for p in range(self.settings.partitions) if p not in self.state.paused]
        async with self.client.pipeline(transaction=False) as pipe:
            for p in live:
                pipe.zrangebyscore(PartitionKeys(p).due, "-inf", now, start=0, num=1)
            firsts = await pipe.execute()
        return [p for p, first in zip(live, firsts, strict=True) if first]

    async def gauges(self, stop: asyncio.Event) -> None:
        tick = 0

        async def step() -> float:
            nonlocal tick
            await self.refresh_control()
            # Depths and ages are scraped every 15-30 s: every few seconds is plenty, and
            # each costs a few round trips per partition.
            if tick % GAUGE_TICKS == 0:
                now = clock.now_ms()
                for p in range(self.settings.partitions):
                    await self._partition_gauges(p, now)
            tick += 1
            return 1.0

        await resilient(SERVICE, "gauges", stop, step)

    async def _partition_gauges(self, partition: int, now: int) -> None:
        pk = PartitionKeys(partition)
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.xinfo_groups(pk.send)
            pipe.zcard(pk.due)
            pipe.zcard(pk.ambiguous)
            pipe.zcard(pk.review)
            pipe.zrange(pk.due, 0, 0, withscores=True)
            groups, due, ambiguous, review, first_due = await pipe.execute()
        group: dict[str, Any] = next((g for g in groups if g.get("name") == SEND_GROUP), {})
        waiting = int(group.get("lag") or 0) + int(group.get("pending") or 0)
        label = str(partition)
        for queue, depth in (
            ("send", waiting),
            ("due", due),
            ("ambiguous", ambiguous),
            ("review", review),
        ):
            metrics.queue_depth.labels(label, queue).set(depth)
        oldest = await self._oldest_waiting_ms(pk, group, now)
        overdue = now - int(first_due[0][1]) if first_due else 0
        metrics.oldest_eligible_age.labels(label).set(max(oldest, overdue, 0) / 1000)

    async def _oldest_waiting_ms(
        self, pk: PartitionKeys, group: dict[str, object], now: int
    ) -> int:
        """Age of the oldest send job not yet finished (undelivered or still pending)."""
        pending = await self.client.xpending(pk.send, SEND_GROUP)
        first = pending.get("min") if pending and pending.get("pending") else None
        if first is None:
            last = str(group.get("last-delivered-id") or "0-0")
            entries = await self.client.xrange(pk.send, "(" + last, "+", count=1)
            first = entries[0][0] if entries else None
        return now - int(str(first).split("-")[0]) if first else 0

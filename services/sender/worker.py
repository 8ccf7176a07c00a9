"""The sender's loops: stream readers, attempt workers, lease takeover, due promoter, gauges.

Every loop logs and continues on Redis trouble (with a capped backoff) and returns soon
after ``stop`` is set; the in-memory job queue is bounded, so a slow provider pushes back
on the readers instead of growing memory.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from redis.exceptions import ResponseError

from services.sender.attempt import AttemptRunner, Job
from services.sender.settings import SenderSettings
from shared import clock, control, metrics
from shared.keys import SEND_GROUP, PartitionKeys
from shared.logging import event
from shared.loops import ERRORS, resilient
from shared.operations import promote_due
from shared.redis import RedisClient
from shared.service import sleep_or_stop

log = logging.getLogger(__name__)
SERVICE = "sender"


async def ensure_groups(client: RedisClient, partitions: int) -> None:
    for p in range(partitions):
        await ensure_group(client, p)


async def ensure_group(client: RedisClient, partition: int) -> None:
    try:
        await client.xgroup_create(PartitionKeys(partition).send, SEND_GROUP, id="0", mkstream=True)
    except ResponseError as error:
        if "BUSYGROUP" not in str(error):
            raise


class Sender:
    def __init__(self, settings: SenderSettings, client: RedisClient, runner: AttemptRunner):
        self.settings = settings
        self.client = client
        self.runner = runner
        self.jobs: asyncio.Queue[Job] = asyncio.Queue(maxsize=settings.concurrency * 2)
        self.state = control.ControlState(frozenset(), {})
        self.reading = asyncio.Event()  # clear once shutdown begins: readers stop first

    # -- control -------------------------------------------------------------------------
    def sending_allowed(self) -> bool:
        return not self.runner.auth_paused

    async def refresh_control(self) -> float:
        self.state = await control.read(self.client)
        mine = self.state.auth_paused.get(self.settings.provider_name)
        fingerprint = control.key_fingerprint(self.settings.provider_api_key.get_secret_value())
        if mine and mine.get("key") != fingerprint:
            # A different key has been deployed since the rejection: try again with it.
            await control.auth_resume(self.client, self.settings.provider_name)
            event(log, logging.INFO, "new provider key deployed; auth pause lifted")
            mine = None
        self.runner.auth_paused = mine is not None
        metrics.provider_auth_paused.labels(self.settings.provider_name).set(int(bool(mine)))
        for p in range(self.settings.partitions):
            metrics.partition_paused.labels(str(p)).set(int(p in self.state.paused))
        metrics.redis_up.labels(SERVICE).set(1)
        return 1.0

    # -- readers -------------------------------------------------------------------------
    async def read_partition(self, partition: int, stop: asyncio.Event) -> None:
        stream = PartitionKeys(partition).send

        async def step() -> float:
            if partition in self.state.paused or not self.sending_allowed():
                return 0.5
            try:
                reply: Any = await self.client.xreadgroup(
                    SEND_GROUP,
                    self.settings.consumer_name,
                    {stream: ">"},
                    count=self.settings.read_batch,
                    block=1000,
                )
            except ResponseError as error:
                if "NOGROUP" not in str(error):
                    raise
                # Redis came back without its data (no persistence, an empty replica, a
                # flush): without the group this partition would never be read again.
                await ensure_group(self.client, partition)
                event(log, logging.WARNING, "send group re-created", partition=partition)
                return 0.1
            for _, entries in reply or []:
                for entry_id, fields in entries:
                    await self._enqueue(partition, entry_id, fields)
            return 0

        await resilient(SERVICE, f"read:{partition}", stop, step)

    async def claim_partition(self, partition: int, stop: asyncio.Event) -> None:
        """Take over entries whose consumer went quiet for longer than a lease."""
        stream = PartitionKeys(partition).send
        lease_ms = self.settings.lease_seconds * 1000

        async def step() -> float:
            if partition in self.state.paused:
                return lease_ms / 2000
            reply: Any = await self.client.xautoclaim(
                stream, SEND_GROUP, self.settings.consumer_name, lease_ms, "0-0", count=100
            )
            for entry_id, fields in reply[1]:
                if fields:  # a deleted entry comes back without fields
                    await self._enqueue(partition, entry_id, fields)
            return lease_ms / 2000

        await resilient(SERVICE, f"claim:{partition}", stop, step)

    async def _enqueue(self, partition: int, entry_id: str, fields: dict[str, str]) -> None:
        """Queue a job; an entry that names no operation of this partition is dropped."""
        operation_id = fields.get("op", "")
        try:
            valid = PartitionKeys.of(operation_id).partition == partition
        except ValueError:
            valid = False
        if valid:
            await self.jobs.put(Job(partition, entry_id, operation_id))
            return
        # Nothing can ever send it; left pending it would be claimed again forever.
        stream = PartitionKeys(partition).send
        await self.client.xack(stream, SEND_GROUP, entry_id)
        await self.client.xdel(stream, entry_id)
        event(
            log, logging.ERROR, "malformed send job dropped", partition=partition, entry_id=entry_id
        )

    # -- workers -------------------------------------------------------------------------
    async def work(self, stop: asyncio.Event) -> None:
        """Run attempts until shutdown, then finish the jobs already taken from Redis."""
        while not (stop.is_set() and self.jobs.empty()):
            try:
                job = await asyncio.wait_for(self.jobs.get(), timeout=0.5)
            except TimeoutError:
                continue
            await self._run_one(job, stop)

    async def _run_one(self, job: Job, stop: asyncio.Event) -> None:
        while not self.sending_allowed() and not stop.is_set():
            await sleep_or_stop(stop, 0.5)
        try:
            # The pacing bucket lives in Redis too: a store error while waiting for a slot
            # must not escape, or this worker dies and takes the whole sender down with it.
            if not self.sending_allowed() or not await self.runner.pacer.acquire(stop):
                return  # shutting down: the entry stays pending and is claimed after a lease
            await self.runner.run(job)
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

    # -- scheduling and gauges -------------------------------------------------------------
    async def promote(self, stop: asyncio.Event) -> None:
        async def step() -> float:
            now = clock.now_ms()
            for p in range(self.settings.partitions):
                if p not in self.state.paused:
                    await promote_due(self.client, p, now)
            return self.settings.promote_interval_seconds

        await resilient(SERVICE, "promote", stop, step)

    async def gauges(self, stop: asyncio.Event) -> None:
        async def step() -> float:
            await self.refresh_control()
            now = clock.now_ms()
            for p in range(self.settings.partitions):
                await self._partition_gauges(p, now)
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

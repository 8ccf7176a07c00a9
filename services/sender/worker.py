"""The sender's loops besides its intake: attempt workers, due promoter, gauges, control.

A worker takes a job from the intake (services/sender/intake.py), runs its attempt through
the partition's provider and gives back what it did not start. Every loop logs and
continues on Redis trouble (with a capped backoff) and returns soon after ``stop`` is set.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from services.sender.attempt import AttemptRunner, Pinned
from services.sender.intake import Intake
from services.sender.job import Job
from services.sender.settings import SenderSettings
from services.sender.unserved import Unserved
from shared import clock, control, metrics
from shared.clock import to_seconds
from shared.keys import SEND_GROUP, PartitionKeys
from shared.logging import event
from shared.loops import ERRORS
from shared.operations import promote_due
from shared.redis import RedisClient

log = logging.getLogger(__name__)
SERVICE = "sender"
GAUGE_TICKS = 3  # partition gauges every third control refresh (seconds)
CROWD_SECONDS, CROWD_MIN = 5.0, 2


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
        self.state = control.ControlState(frozenset(), {})
        self.intake = Intake(settings, client, self.readable, self.paused)
        self._serving: dict[int, str] = {}  # partition -> provider, as last exported
        self.unserved = Unserved(settings.partitions)
        self._gauge_ticks = 0  # control refreshes so far (partition gauges every GAUGE_TICKS)
        # partition -> the workers waiting for a send slot for one of its jobs; a pause of
        # the partition cancels their waits (and only those: see _slot)
        self._slot_waits: dict[int, set[asyncio.Task[Any]]] = {}
        self._waits_ended: set[asyncio.Task[Any]] = set()

    # -- control -------------------------------------------------------------------------
    def runner_for(self, partition: int) -> AttemptRunner | None:
        """The partition's provider; None if this sender lacks the one it is assigned to."""
        return self.runners.get(self.state.provider_for(partition, self.runner.name))

    def paused(self, partition: int) -> bool:
        return partition in self.state.paused

    def readable(self, partition: int) -> bool:
        """Whether the partition's new jobs may be read: not paused, sendable here, and its
        provider not crowded."""
        return (
            not self.paused(partition)
            and self.sending_allowed(partition)
            and not self.crowded(partition)
        )

    def crowded(self, partition: int) -> bool:
        """The partition's provider has more workers waiting for a slot than it gives in
        CROWD_SECONDS: reading more of its jobs would only hold the workers that partitions
        of another provider need (a provider refusing every send, during a switch away)."""
        runner = self.runner_for(partition)
        if runner is None or len(self.runners) == 1:
            return False
        return runner.pacer.waiting >= max(CROWD_MIN, runner.pacer.rate * CROWD_SECONDS)

    def sending_allowed(self, partition: int | None = None) -> bool:
        """For a partition: its provider is here and not paused by credentials; for the
        process (readiness): at least one of its providers can send."""
        if partition is None:
            return any(not r.health.paused for r in self.runners.values())
        runner = self.runner_for(partition)
        return runner is not None and not runner.health.paused

    async def refresh_control(self) -> float:
        self.state = await control.read(self.client)
        self._end_paused_waits()
        for runner in self.runners.values():
            await runner.health.refresh(self.state)
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

    # -- workers -------------------------------------------------------------------------
    async def work(self, stop: asyncio.Event) -> None:
        """Take a job, run its attempt, until shutdown (the intake hands back what no
        worker started by then)."""
        while (job := await self.intake.next_job()) is not None:
            try:
                await self._run_one(job, stop)
            finally:
                await self.intake.finished(job)

    async def _run_one(self, job: Job, stop: asyncio.Event) -> None:
        # A paused partition's job is handed back rather than kept waiting here: a provider
        # switch waits until nothing of the partition is in flight. So is one whose provider
        # cannot send: held here, it would keep a worker from the partitions that can, and
        # its partition from a switch away (the reader leaves it until sending resumes); and
        # one whose provider is crowded, for the same reason.
        if not self.paused(job.partition) and not self.readable(job.partition):
            await self.intake.hand_back([job])
            return
        try:
            pinned = await self._attempt_at(self.runner_for(job.partition), job, stop)
            if pinned is not None:
                # Sent through the provider that decided its replay, never through the
                # partition's. Rare: after a switch only.
                event(
                    log,
                    logging.INFO,
                    "operation pinned to another provider",
                    operation_id=job.operation_id,
                    provider=pinned.provider,
                )
                if await self._attempt_at(self.runners.get(pinned.provider), job, stop) is not None:
                    await self.intake.hand_back([job])
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

    async def _attempt_at(
        self, runner: AttemptRunner | None, job: Job, stop: asyncio.Event
    ) -> Pinned | None:
        """One attempt through ``runner`` (None: handed back), unless its operation is
        pinned to another provider."""
        # The pacing schedule lives in Redis too: a store error while waiting for a slot
        # must not escape, or this worker dies and takes the whole sender down with it.
        allowed = runner is not None and not runner.health.paused
        slot = await self._slot(runner, job, stop) if runner and allowed else None
        quota_at = await runner.health.take_quota() if runner and slot is not None else None
        if runner is None or slot is None or quota_at is None:
            await self.intake.hand_back([job])
            return None
        return await runner.run(job, slot, quota_at)

    async def _slot(self, runner: AttemptRunner, job: Job, stop: asyncio.Event) -> float | None:
        """A send slot; None at shutdown, or once the job's partition is paused while it
        waits (``refresh_control`` ends the wait): a throttled provider's next slot may be
        minutes away, and a switch of the partition waits until nothing of it is in flight."""
        # The wait runs in this worker's task, not a task of its own (one per email): a
        # pause cancels this task while it is in the wait, and only there (it leaves the
        # set before any other await), and the cancel is taken back here.
        worker = asyncio.current_task()
        assert worker is not None
        waits = self._slot_waits.setdefault(job.partition, set())
        waits.add(worker)
        try:
            return await runner.pacer.acquire(stop)
        except asyncio.CancelledError:
            if worker not in self._waits_ended or worker.uncancel():
                raise  # this worker is being cancelled, not only its wait
            return None
        finally:
            waits.discard(worker)
            self._waits_ended.discard(worker)

    def _end_paused_waits(self) -> None:
        for partition in self.state.paused:
            for worker in self._slot_waits.get(partition, ()):
                if worker not in self._waits_ended:  # one cancel per wait, taken back once
                    self._waits_ended.add(worker)
                    worker.cancel()

    # -- scheduling and gauges -------------------------------------------------------------
    async def promote_step(self) -> float:
        now = clock.now_ms()
        for p in await self._due_partitions(now):
            await promote_due(self.client, p, now)
        return self.settings.promote_interval_seconds

    async def _due_partitions(self, now: int) -> list[int]:
        """Partitions with work due now: one pipelined look at every due set, so an idle
        sender costs one round trip per interval, not one per partition."""
        live = [p for p in range(self.settings.partitions) if p not in self.state.paused]
        async with self.client.pipeline(transaction=False) as pipe:
            for p in live:
                pipe.zrangebyscore(PartitionKeys(p).due, "-inf", now, start=0, num=1)
            firsts = await pipe.execute()
        return [p for p, first in zip(live, firsts, strict=True) if first]

    async def gauges_step(self) -> float:
        await self.refresh_control()
        # Depths and ages are scraped every 15-30 s: every few seconds is plenty, and
        # each costs a few round trips per partition.
        if self._gauge_ticks % GAUGE_TICKS == 0:
            now = clock.now_ms()
            for p in range(self.settings.partitions):
                await self._partition_gauges(p, now)
        self._gauge_ticks += 1
        return 1.0

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
        metrics.oldest_eligible_age.labels(label).set(to_seconds(max(oldest, overdue, 0)))

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

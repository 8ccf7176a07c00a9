"""Ambiguous attempts: settle each as the provider's capabilities allow, before any replay.

One reconciler per configured provider, each settling only the operations it owns (the
provider of their latest attempt; an operation that names none belongs to the first listed):
only the provider that holds an attempt can say whether it accepted it. An operation owned
by a provider this poller does not know waits, and is logged once.

The decision itself (look up / replay with the same key / wait / review) is
``services.poller.ambiguity``; this loop asks about every ambiguous attempt at once (a key's
retention may be short), ahead of feed polling in the request budget, honours 429s, and
afterwards reads the events of a send it has just learned the message id of (the feed may
have shown them before the mapping existed).
"""

from __future__ import annotations

import logging
import time

from services.poller import traced
from services.poller.ambiguity import (
    Asking,
    BudgetWait,
    LookupThrottled,
    Resolution,
    due_ambiguous,
    owners,
    reconcile,
)
from services.poller.feed import ProviderCalls
from services.poller.observer import Observer
from services.poller.settings import PollerSettings
from shared import clock
from shared.delivery import parse_event
from shared.logging import event
from shared.operations import load_operation
from shared.providers.base import ProviderUnavailable
from shared.redis import RedisClient

log = logging.getLogger(__name__)

MAX_TO_READ = 1000
MAX_ASKED_EARLY = 10_000  # attempts remembered as asked before their lookup is trusted
MAX_READ_TRIES = 5
MAX_UNKNOWN_OWNERS = 1000
MAX_BACKED_OFF = 10_000  # operations remembered with a failing lookup


class Backoff:
    """Operations whose lookup failed, each held for a while that doubles with every failure
    in a row (from the reconcile interval up to ``cap_seconds``), so one operation the
    provider keeps failing on is asked about less and less and holds no other back."""

    def __init__(self, base_seconds: float, cap_seconds: float) -> None:
        self.base_seconds = base_seconds
        self.cap_seconds = cap_seconds
        self.held: dict[str, tuple[int, float]] = {}  # operation id -> (failures, until)

    def holds(self, operation_id: str) -> bool:
        entry = self.held.get(operation_id)
        return entry is not None and time.monotonic() < entry[1]

    def failed(self, operation_id: str) -> float:
        failures = self.held.pop(operation_id, (0, 0.0))[0] + 1
        delay = min(self.base_seconds * 2.0 ** min(failures - 1, 30), self.cap_seconds)
        if len(self.held) >= MAX_BACKED_OFF:
            self.held.pop(next(iter(self.held)))
        self.held[operation_id] = (failures, time.monotonic() + delay)
        return delay

    def forget(self, operation_id: str) -> None:
        self.held.pop(operation_id, None)


class Reconciler:
    def __init__(
        self,
        client: RedisClient,
        calls: ProviderCalls,
        observer: Observer,
        settings: PollerSettings,
        *,
        names: tuple[str, ...] = (),
    ) -> None:
        """``names``: every provider this poller knows, the first listed first (default: this
        one alone)."""
        self.client = client
        self.calls = calls
        self.observer = observer
        self.settings = settings
        self.names = names or (calls.name,)
        self.to_read: dict[str, int] = {}  # operation id -> failed reads so far
        self.waiting = 0  # ambiguous attempts due for a lookup at the last step
        self.unknown: set[str] = set()  # operations owned elsewhere, already logged
        # Ambiguous operations already asked about once before the lookup is trustworthy
        # (a "found" settles them at once); the next ask waits for the settled lookup.
        self.asked_early: dict[str, None] = {}
        self.cursor = 0  # the partition the next step starts at
        self.backoff = Backoff(
            settings.reconcile_interval_seconds, settings.reconcile_backoff_cap_seconds
        )

    async def step(self) -> float:
        """Every partition's due operations, starting where the last step stopped (a step
        that had to wait resumes there, never at partition 0 again)."""
        waiting = 0
        partitions = self.settings.partitions
        try:
            for offset in range(partitions):
                partition = (self.cursor + offset) % partitions
                mine = await self._mine(await due_ambiguous(self.client, partition))
                waiting += len(mine)  # one held back still waits: the stall check sees it
                due = [op for op in mine if not self.backoff.holds(op)]
                self.calls.lookups_waiting = len(due)
                for operation_id in due:
                    wait = await self._reconcile(operation_id)
                    self.calls.lookups_waiting -= 1
                    if wait:
                        self.cursor = partition
                        return wait
            self.cursor = 0
        finally:
            self.calls.lookups_waiting = 0
            self.waiting = waiting
        if not waiting and self.calls.feed is None:
            self.calls.succeeded()  # nothing waits on a provider without a feed: not stalled
        return await self._read_messages() or self.settings.reconcile_interval_seconds

    async def _mine(self, due: list[str]) -> list[str]:
        """The operations of ``due`` this provider holds."""
        if not due:
            return due
        mine = []
        for operation_id, owner in zip(due, await owners(self.client, due), strict=True):
            owner = owner or self.names[0]
            if owner == self.calls.name:
                mine.append(operation_id)
            elif owner not in self.names and self.calls.name == self.names[0]:
                self._unknown_owner(operation_id, owner)
        return mine

    def _unknown_owner(self, operation_id: str, owner: str) -> None:
        if operation_id in self.unknown or len(self.unknown) >= MAX_UNKNOWN_OWNERS:
            return
        self.unknown.add(operation_id)
        event(
            log,
            logging.WARNING,
            "ambiguous attempt held by a provider that is not "
            "configured; it waits (configure that provider again, or review it)",
            operation_id=operation_id,
            provider=owner,
        )

    async def _reconcile(self, operation_id: str) -> float:
        if self.calls.provider.capabilities.lookup is None:
            return await self._settle(operation_id)  # never asks: spends no budget
        return await self._ask(operation_id)

    async def _settle(self, operation_id: str) -> float:
        await reconcile(self.client, self.calls.provider, self.settings, operation_id)
        return 0.0

    async def _ask(self, operation_id: str) -> float:
        asked: list[bool] = []

        def permit() -> float:
            # Budget is spent only when a lookup is really made, never on a wait.
            wait = self.calls.budget.take()
            asked.append(not wait)
            return wait

        early = operation_id not in self.asked_early
        try:
            decision = await reconcile(
                self.client, self.calls.provider, self.settings, operation_id, Asking(early, permit)
            )
        except BudgetWait as wait:
            return wait.seconds
        except LookupThrottled as throttled:
            return self.calls.throttled(throttled.retry_after, throttled.server_date)
        except ProviderUnavailable as error:
            delay = self.backoff.failed(operation_id)
            event(
                log,
                logging.WARNING,
                "lookup failed; will ask again",
                operation_id=operation_id,
                error=str(error),
                retry_in=delay,
            )
            return self.settings.reconcile_interval_seconds
        self.backoff.forget(operation_id)
        if any(asked):
            self.calls.budget.answered()
            self.calls.succeeded()
        self._asked_early(operation_id, decision)
        if decision is Resolution.ACCEPTED:
            self._remember(operation_id)
        return 0.0

    def _asked_early(self, operation_id: str, decision: Resolution | None) -> None:
        if decision is not Resolution.WAIT:
            self.asked_early.pop(operation_id, None)  # settled: nothing more to ask
            return
        if operation_id not in self.asked_early and len(self.asked_early) >= MAX_ASKED_EARLY:
            self.asked_early.pop(next(iter(self.asked_early)))
        self.asked_early[operation_id] = None

    def _remember(self, operation_id: str) -> None:
        if len(self.to_read) >= MAX_TO_READ:
            self.to_read.pop(next(iter(self.to_read)))
        self.to_read[operation_id] = 0

    async def _read_messages(self) -> float:
        for operation_id in list(self.to_read):
            wait = await self._read_one(operation_id)
            if wait:
                return wait
        return 0.0

    async def _read_one(self, operation_id: str) -> float:
        operation = await load_operation(self.client, operation_id)
        message_id = operation.provider_message_id if operation else ""
        if not message_id:
            self.to_read.pop(operation_id, None)
            return 0.0
        feed = self.calls.feed
        if feed is None:
            self.to_read.pop(operation_id, None)  # events come by webhook or queue
            return 0.0
        try:
            answer = await self.calls.call("message", lambda: feed.message(message_id))
        except ProviderUnavailable:
            answer = None
        if isinstance(answer, float):
            return answer
        if answer is not None and answer.status == 200:
            self.calls.succeeded()
            rows = answer.body.get("events")
            now = clock.now_ms()
            parsed = (parse_event(row, now) for row in (rows if isinstance(rows, list) else []))
            events = [ev for ev in parsed if ev is not None]
            with traced.received(self.calls.name, "message", len(events)):
                await self.observer.observe(events)
            self.to_read.pop(operation_id, None)
            return 0.0
        tries = self.to_read.get(operation_id, 0) + 1
        if tries >= MAX_READ_TRIES or (answer is not None and answer.status == 404):
            self.to_read.pop(operation_id, None)  # the feed or the window will settle it
        else:
            self.to_read[operation_id] = tries
        return 0.0

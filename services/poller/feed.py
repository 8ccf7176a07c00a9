"""The events feed: one page per step, cursor stored in Redis after the page is applied.

With several providers each has its own feed, cursor and `ProviderCalls` (request budget,
credentials, last success): one provider throttling or failing never holds up another.

A restart resumes from the stored cursor and replays at most the page that was being
applied when it stopped; deduplication on (message_id, type, occurred_at) makes that
harmless. Every call goes through :class:`ProviderCalls`: the request budget, the metrics, and
429 + Retry-After on the polling routes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from services.poller import traced
from services.poller.budget import Budget
from services.poller.observer import Observer
from services.poller.settings import PollerSettings
from shared import clock, metrics, retry_after, tracing
from shared.clock import to_seconds
from shared.delivery import DeliveryEvent, parse_event
from shared.keys import POLLER_CURSOR, poller_cursor
from shared.logging import event
from shared.loops import cap_advised_wait
from shared.providers.base import PollResult, Provider, ProviderUnavailable
from shared.providers.http import HttpProvider
from shared.redis import RedisClient

log = logging.getLogger(__name__)
LOOKUP_YIELD_SECONDS = 0.05

# The provider's answer to a cursor past the feed's end (docs/provider-contract.md).
CURSOR_BEYOND_FEED = 410


class ProviderCalls:
    """Budget, metrics and 429 handling shared by every provider call the poller makes."""

    def __init__(
        self,
        provider: Provider,
        budget: Budget,
        max_wait: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.provider = provider
        self.name = provider.name
        # The pull feed and message reads exist only for the http contract; the other
        # providers push their events (webhook, queue).
        self.feed = provider if isinstance(provider, HttpProvider) else None
        self.budget = budget
        self.max_wait = max_wait
        self.credentials_ok = True
        self.clock = clock
        # Lookups go ahead of feed polling: the feed yields while any are waiting.
        self.lookups_waiting = 0
        # Until a first success, the process start: a poller that never gets one is as
        # stalled as one that stopped getting them.
        self.last_success = clock()
        metrics.poller_last_success.labels(self.name).set(self.last_success)

    def succeeded(self) -> None:
        """An events page or a lookup answered usefully, or nothing waits on this provider:
        the poller is not stalled on it."""
        self.last_success = self.clock()
        metrics.poller_last_success.labels(self.name).set(self.last_success)

    def stalled_for(self) -> float:
        return self.clock() - self.last_success

    async def call(
        self, route: str, request: Callable[[], Awaitable[PollResult]]
    ) -> PollResult | float:
        """The provider's answer, or how many seconds to wait before asking (budget, 429)."""
        wait = self.budget.take()
        if wait:
            return wait
        result = await request()
        metrics.poll_requests.labels(self.name, route, str(result.status)).inc()
        if result.status == 429:
            metrics.poll_throttled.labels(self.name, route).inc()
            return self.throttled(result.retry_after, result.server_date)
        self.budget.answered()
        self._credentials(result.status, route)
        return result

    def throttled(self, header: str | None, server_date: str | None) -> float:
        advice = retry_after.parse(header, datetime.now(UTC), server_date)
        delay = to_seconds(advice.delay_ms) if advice.delay_ms is not None else None
        if delay is not None:
            # A read is cheap and lookups wait behind it: a 429 holds them no longer than
            # the poller's own backoff would, however long the provider asks for.
            limit = min(self.max_wait, self.budget.backoff_cap)
            delay = cap_advised_wait(delay, limit, "poller")
        wait = self.budget.throttled(delay)
        event(
            log,
            logging.INFO,
            "provider throttled polling; waiting",
            provider=self.name,
            source=advice.source,
            wait_s=round(wait, 3),
        )
        return wait

    def _credentials(self, status: int, route: str) -> None:
        rejected = status in (401, 403)
        if rejected and self.credentials_ok:
            event(
                log,
                logging.ERROR,
                "provider rejected the poller's credentials",
                provider=self.name,
                route=route,
                status=status,
            )
        self.credentials_ok = not rejected


def parse_page(body: dict[str, object]) -> tuple[list[DeliveryEvent], int, str] | None:
    """(usable events, rows in the page, next cursor), or None for a malformed page."""
    rows, cursor = body.get("data"), body.get("next")
    if not isinstance(rows, list) or not isinstance(cursor, str):
        return None
    now = clock.now_ms()
    events = [ev for ev in (parse_event(row, now) for row in rows) if ev is not None]
    if len(events) < len(rows):
        event(log, logging.WARNING, "unusable events skipped", count=len(rows) - len(events))
    return events, len(rows), cursor


class Feed:
    def __init__(
        self,
        client: RedisClient,
        calls: ProviderCalls,
        observer: Observer,
        settings: PollerSettings,
        *,
        first: bool = True,
    ) -> None:
        """``first``: the provider listed first, which also reads the cursor key that names
        no provider (``POLLER_CURSOR``, a single provider's), so naming a second provider
        does not make the first one read its feed again from the start."""
        self.client = client
        self.calls = calls
        self.observer = observer
        self.settings = settings
        self.cursor_key = poller_cursor(calls.name)
        self.unnamed_cursor = first

    async def step(self) -> float:
        """Poll one page; 0 when the page was full (more is waiting), else the interval."""
        idle = self.settings.poll_interval_seconds
        feed = self.calls.feed
        if feed is None:
            return idle
        if self.calls.lookups_waiting > 0:
            return LOOKUP_YIELD_SECONDS
        cursor = await self._cursor()
        try:
            with tracing.unrecorded_http():
                answer = await self.calls.call(
                    "events", lambda: feed.events(cursor, self.settings.poll_batch)
                )
        except ProviderUnavailable as error:
            event(
                log,
                logging.WARNING,
                "events feed unreachable",
                provider=self.calls.name,
                error=str(error),
            )
            return idle
        if isinstance(answer, float):
            return answer
        if answer.status == CURSOR_BEYOND_FEED:
            return await self.restart_feed()
        page = parse_page(answer.body) if answer.status == 200 else None
        if page is None:
            # A rejected cursor (400) needs a person: see docs/poller-router.md.
            event(
                log,
                logging.WARNING,
                "events feed answered unusably",
                provider=self.calls.name,
                status=answer.status,
            )
            return idle
        events, rows, next_cursor = page
        self.calls.succeeded()
        with traced.received(self.calls.name, "events", len(events)):
            tally = await self.observer.observe(events)
        if next_cursor != cursor:
            await self.client.set(self.cursor_key, next_cursor)
        if rows:
            event(
                log,
                logging.DEBUG,
                "events page applied",
                rows=rows,
                applied=tally.applied,
                kept=tally.kept,
                duplicate=tally.duplicate,
                held=tally.held,
            )
        return 0.0 if rows >= self.settings.poll_batch else idle

    async def _cursor(self) -> str:
        cursor = await self.client.get(self.cursor_key)
        if cursor is None and self.unnamed_cursor:
            cursor = await self.client.get(POLLER_CURSOR)
        return str(cursor or "")

    async def restart_feed(self) -> float:
        """The provider has forgotten the feed our cursor points into (a restarted sandbox, a
        provider-side reset): read it again from its start. Replayed events are deduplicated;
        events the provider lost are not coming back, and their operations' delivery stays
        ``unknown`` until the observation window closes."""
        await self.client.delete(self.cursor_key)
        if self.unnamed_cursor:  # one key per call: the two may sit on different Cluster nodes
            await self.client.delete(POLLER_CURSOR)
        metrics.poll_cursor_resets.labels(self.calls.name).inc()
        event(
            log,
            logging.WARNING,
            "events feed cursor is beyond the feed's end (the provider "
            "lost its events); reading the feed again from its start",
            provider=self.calls.name,
        )
        return 0.0

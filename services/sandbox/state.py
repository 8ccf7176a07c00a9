"""The live state of one sandbox: current settings and everything derived from them."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from aiohttp import web

from services.sandbox.faults import Faults
from services.sandbox.ratelimit import TokenBucket, send_bucket
from services.sandbox.retry_after import RetryAfterFormatter
from services.sandbox.settings import SandboxSettings
from services.sandbox.stalls import StallWatch
from services.sandbox.stats import Stats
from services.sandbox.store import Event, Message, Store

# Told of every recorded message and the events planned for it (a provider mode's webhooks).
OnRecorded = Callable[[Message, list[tuple[float, Event]]], None]


Context = Callable[[web.Application], AsyncIterator[None]]


def running(loop: Callable[[], Coroutine[Any, Any, None]]) -> Context:
    """An aiohttp cleanup context running ``loop`` while the app serves (the stall watch, a
    provider mode's webhooks), cancelled at its stop."""

    async def context(_: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(loop())
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    return context


class Sandbox:
    def __init__(self, settings: SandboxSettings) -> None:
        self.settings = settings
        self.store = _new_store(settings)
        self.stats = Stats(settings.max_tracked_keys)
        self.stalls = StallWatch()
        self.on_recorded: OnRecorded | None = None
        self._fresh_buckets(settings)
        self._derive(settings)

    def _fresh_buckets(self, settings: SandboxSettings) -> None:
        self.send_bucket = _send_bucket(settings)
        self.poll_bucket = TokenBucket(settings.poll_rate_per_second, settings.poll_burst)

    def _derive(self, settings: SandboxSettings) -> None:
        if _send_limit(settings) != _send_limit(self.settings):
            self.send_bucket = _send_bucket(settings)
        self.settings = settings
        self.auth_header = f"Bearer {settings.api_key.get_secret_value()}"
        self.poll_bucket = _bucket(
            self.poll_bucket, settings.poll_rate_per_second, settings.poll_burst
        )
        self.retry_after = RetryAfterFormatter(settings.retry_after_form)
        self.faults = Faults(settings)
        self.store.max_messages = settings.max_messages
        self.store.max_events = settings.max_events
        self.store.window = settings.idempotency_window_seconds
        self.stats.sent_by_key.cap = settings.max_tracked_keys
        self.stats.sent_by_operation.cap = settings.max_tracked_keys

    def count_throttled(self, counter: str) -> None:
        """Count one 429 (``send_throttled`` / ``poll_throttled``), and apart when the
        sandbox itself was running late (``stalls.py``)."""
        self.stats.count(counter)
        if self.stalls.stalled_recently():
            self.stats.count(f"{counter}_after_stall")

    def reconfigure(self, settings: SandboxSettings) -> None:
        """Apply new settings: fault counters, the RNG and the Retry-After rotation start
        over; a bucket refills only if its rate or burst changed; messages, events and
        stats are kept (``reset`` clears those)."""
        self._derive(settings)

    def reset(self) -> None:
        """Forget every message, event and counter; keep the settings."""
        self.store = _new_store(self.settings)
        self.stats = Stats(self.settings.max_tracked_keys)
        self._fresh_buckets(self.settings)
        self._derive(self.settings)


def _new_store(settings: SandboxSettings) -> Store:
    return Store(settings.max_messages, settings.max_events, settings.idempotency_window_seconds)


def _send_limit(settings: SandboxSettings) -> tuple[object, ...]:
    return (
        settings.send_rate_per_second,
        settings.send_rate_schedule,
        settings.send_shared_quota,
        settings.send_burst,
        settings.mode,
        settings.send_blackout_seconds,
    )


def _send_bucket(settings: SandboxSettings) -> TokenBucket:
    return send_bucket(
        settings.send_rate_per_second,
        settings.send_rate_schedule,
        settings.send_shared_quota,
        settings.send_burst,
        # SendGrid documents a fixed refresh period with an epoch-second reset.
        fixed_window=settings.mode == "sendgrid",
        blackout=settings.send_blackout_seconds,
    )


def _bucket(current: TokenBucket, rate: float, burst: int) -> TokenBucket:
    # Flipping an unrelated fault must not hand a throttled client a fresh burst.
    if current.rate == rate and current.burst == burst:
        return current
    return TokenBucket(rate, burst)

"""Delivery events pushed by the provider modes, as the providers push them.

When ``webhook_url`` is set, a provider mode POSTs each accepted message's events to it: the
provider's acceptance event at once (SendGrid ``processed``, Mailgun ``accepted``; Postmark
has none), then the events the feed plans (delivered or bounced, a complaint, a late
deferred, a duplicate) when they fall due. Each dialect shapes and signs the request as its
provider documents (``Hook.build`` in services/sandbox/dialects/<provider>.py). A refused or
failed POST is tried again a few times, quicker than the providers' hours of retries;
Mailgun's documented 406 is never retried. Everything is bounded: the queue by
``max_events``, the POSTs in flight by ``CONCURRENCY``, each POST by ``TIMEOUT``; no redirect
is followed. Counters in ``/_sandbox/stats`` ``webhooks``: POSTs ``posted`` (a 2xx answer),
``retried``, ``refused`` (a non-2xx answer to the last try), ``failed`` (no answer to the
last try), and events ``dropped`` (the queue was full).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import ec
from yarl import URL

from services.sandbox.logs import log
from services.sandbox.responses import SANDBOX
from services.sandbox.settings import SandboxSettings
from services.sandbox.state import Sandbox
from services.sandbox.store import Event, Message

ACCEPTED = "accepted"  # the sandbox's name for a provider's acceptance event (not in the feed)
ATTEMPTS = 3
RETRY_SECONDS = 0.5
TIMEOUT = aiohttp.ClientTimeout(total=5, sock_connect=2)
CONCURRENCY = 16
MAX_BATCH = 500  # events per SendGrid POST (SendGrid batches by time and size)

Pending = tuple[Event, Message]
Post = tuple[bytes, dict[str, str]]


@dataclass(slots=True)
class Signing:
    """What the dialects sign with: SendGrid's key pair is made by the sandbox, as SendGrid
    makes it (the public half is served at the dialect's documented route); Mailgun's key
    and Postmark's credentials come from the settings."""

    settings: SandboxSettings
    ecdsa: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )


@dataclass(frozen=True, slots=True)
class Hook:
    """A provider mode's webhook: ``build`` turns due events into signed POSTs; ``acceptance``
    says whether the provider reports acceptance; ``final`` lists the statuses after which
    the provider gives up on a POST (Mailgun's 406)."""

    build: Callable[[Signing, list[Pending]], list[Post]]
    acceptance: bool = False
    final: frozenset[int] = frozenset()
    # Whether the provider retries this POST at all when it fails (Mailgun never retries a
    # "delivered" notification); None: every POST is retried.
    retried: Callable[[bytes], bool] | None = None


def acceptance_event(message: Message) -> Event:
    return Event(f"evt_{secrets.token_hex(8)}", message.id, ACCEPTED, message.created_at)


class Emitter:
    def __init__(self, sandbox: Sandbox, hook: Hook) -> None:
        self.sandbox = sandbox
        self.hook = hook
        self.signing = Signing(sandbox.settings)
        self.pending: list[tuple[float, int, Event, Message]] = []
        self.tiebreak = itertools.count()
        self.wake = asyncio.Event()

    def schedule(self, message: Message, planned: list[tuple[float, Event]]) -> None:
        """Queue a message's events (called when it is recorded); nothing without a URL."""
        if not self.sandbox.settings.webhook_url:
            return
        if self.hook.acceptance:
            planned = [(message.created_mono, acceptance_event(message)), *planned]
        for due, event in planned:
            if len(self.pending) >= self.sandbox.settings.max_events:
                self.sandbox.stats.count("webhook_dropped")
                continue
            heapq.heappush(self.pending, (due, next(self.tiebreak), event, message))
        self.wake.set()

    def due(self, now: float) -> list[Pending]:
        found: list[Pending] = []
        while self.pending and self.pending[0][0] <= now:
            _, _, event, message = heapq.heappop(self.pending)
            found.append((event, message))
        return found

    async def run(self) -> None:
        limit = asyncio.Semaphore(CONCURRENCY)
        tasks: set[asyncio.Task[None]] = set()

        def finished(task: asyncio.Task[None]) -> None:
            tasks.discard(task)
            limit.release()

        connector = aiohttp.TCPConnector(limit=CONCURRENCY)
        async with aiohttp.ClientSession(timeout=TIMEOUT, connector=connector) as session:
            while True:
                await self._next()
                self.signing.settings = self.sandbox.settings  # keys may change at runtime
                # Credentials in the URL are the dialect's to send (Postmark's basic auth).
                url = URL(self.sandbox.settings.webhook_url).with_user(None)
                for body, headers in self._posts():
                    await limit.acquire()
                    task = asyncio.create_task(self._post(session, url, body, headers))
                    tasks.add(task)
                    task.add_done_callback(finished)

    def _posts(self) -> list[Post]:
        """The due events as requests; a dialect that fails is logged, never the end of the
        loop (those events are lost, and counted as dropped)."""
        due = self.due(time.monotonic())
        try:
            return self.hook.build(self.signing, due)
        except Exception:
            self.sandbox.stats.events["webhook_dropped"] += len(due)
            log("sandbox.webhook.build_failed", logging.ERROR, exc_info=True)
            return []

    async def _next(self) -> None:
        """Until the earliest event is due (or a new one is queued)."""
        self.wake.clear()
        wait = self.pending[0][0] - time.monotonic() if self.pending else None
        if wait is not None and wait <= 0:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.wake.wait(), wait)

    async def _post(
        self, session: aiohttp.ClientSession, url: URL, body: bytes, headers: dict[str, str]
    ) -> None:
        stats = self.sandbox.stats
        for attempt in range(ATTEMPTS):
            if attempt:
                stats.count("webhook_retried")
                await asyncio.sleep(RETRY_SECONDS * attempt)
            status = await self._once(session, url, body, headers)
            if status is not None and 200 <= status < 300:
                stats.count("webhook_posted")
                return
            if status in self.hook.final or not self._retried(body):
                break
        stats.count("webhook_refused" if status is not None else "webhook_failed")
        log("sandbox.webhook.undelivered", logging.WARNING, status=status)

    def _retried(self, body: bytes) -> bool:
        return self.hook.retried is None or self.hook.retried(body)

    @staticmethod
    async def _once(
        session: aiohttp.ClientSession, url: URL, body: bytes, headers: dict[str, str]
    ) -> int | None:
        try:
            async with session.post(url, data=body, headers=headers,
                                    allow_redirects=False) as answer:  # fmt: skip
                await answer.read()
                return answer.status
        except (aiohttp.ClientError, TimeoutError):
            return None


WEBHOOKS = web.AppKey("webhooks", Emitter)


def install(app: web.Application, hook: Hook) -> None:
    """Give a provider mode its emitter: recorded messages are handed to it, and it runs
    for the life of the app."""
    emitter = Emitter(app[SANDBOX], hook)
    app[WEBHOOKS] = emitter
    app[SANDBOX].on_recorded = emitter.schedule

    async def running(_: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(emitter.run())
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    app.cleanup_ctx.append(running)

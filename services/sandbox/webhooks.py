"""Delivery events pushed by the provider modes, as the providers push them.

When ``webhook_url`` is set, a provider mode POSTs each accepted message's events to it: the
provider's acceptance event at once (SendGrid ``processed``, Mailgun ``accepted``; Postmark
has none), then the events the feed plans (delivered or bounced, a complaint, a late
deferred, a duplicate) when they fall due. Each dialect shapes and signs the request as its
provider documents (``Hook.build`` in services/sandbox/dialects/<provider>.py). A refused or
failed POST is tried again on the provider's documented schedule (``Hook.retries``, each
dialect naming its page), every wait multiplied by ``webhook_retry_scale`` so a test can
live through hours of retries in a second; the answers a provider documents as final
(Mailgun's 406, Postmark's 4xx) end it. Everything is bounded: the queue and the POSTs
waiting for a retry by ``max_events``, the POSTs in flight by ``CONCURRENCY`` (a POST
waiting for its retry holds no slot), each POST by ``TIMEOUT``; no redirect is followed.
Counters in ``/_sandbox/stats`` ``webhooks``: POSTs ``posted`` (a 2xx answer), ``retried``,
``refused`` (a non-2xx answer to the last try), ``failed`` (no answer to the last try), and
events ``dropped`` (the queue, or the POSTs waiting for a retry, were full).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import ec
from yarl import URL

from services.sandbox.logs import log
from services.sandbox.responses import SANDBOX
from services.sandbox.settings import SandboxSettings
from services.sandbox.state import Sandbox, running
from services.sandbox.store import Event, Message

ACCEPTED = "accepted"  # the sandbox's name for a provider's acceptance event (not in the feed)
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
    """A provider mode's webhook: ``build`` turns due events into signed POSTs; ``retries``
    is the provider's documented schedule, the wait in seconds before each retry (counted
    from the failed attempt before it; its length is how many retries there are);
    ``acceptance`` says whether the provider reports acceptance; ``final`` lists the
    statuses after which the provider gives up on a POST (Mailgun's 406)."""

    build: Callable[[Signing, list[Pending]], list[Post]]
    retries: tuple[float, ...]
    acceptance: bool = False
    final: frozenset[int] = frozenset()
    # Whether the provider retries this POST at all when it fails (Mailgun never retries a
    # "delivered" notification); None: every POST is retried.
    retried: Callable[[bytes], bool] | None = None


def exponential(first: float, horizon: float) -> tuple[float, ...]:
    """Waits doubling from ``first`` whose last retry lands on ``horizon`` (seconds after
    the first attempt): for a provider that documents how long it retries, not when."""
    waits: list[float] = []
    wait = first
    while sum(waits) + wait < horizon:
        waits.append(wait)
        wait *= 2
    return (*waits, horizon - sum(waits))


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
        connector = aiohttp.TCPConnector(limit=CONCURRENCY)
        async with aiohttp.ClientSession(timeout=TIMEOUT, connector=connector) as session:
            while True:
                await self._next()
                self.signing.settings = self.sandbox.settings  # keys may change at runtime
                # Credentials in the URL are the dialect's to send (Postmark's basic auth).
                url = URL(self.sandbox.settings.webhook_url).with_user(None)
                for body, headers in self._posts():
                    if len(tasks) >= self.sandbox.settings.max_events:
                        self.sandbox.stats.count("webhook_dropped")
                        continue
                    post = Posting(session, limit, url, body, headers)
                    task = asyncio.create_task(self._post(post))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)

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

    async def _post(self, post: Posting) -> None:
        """The first attempt, then a retry after each wait of the provider's schedule
        (read at each wait: the scale may change at runtime), until a 2xx or a final
        answer."""
        stats = self.sandbox.stats
        status = await post.once()
        for wait in self.hook.retries if self._retried(post.body) else ():
            if _delivered(status) or status in self.hook.final:
                break
            stats.count("webhook_retried")
            await asyncio.sleep(wait * self.sandbox.settings.webhook_retry_scale)
            status = await post.once()
        if _delivered(status):
            stats.count("webhook_posted")
            return
        stats.count("webhook_refused" if status is not None else "webhook_failed")
        log("sandbox.webhook.undelivered", logging.WARNING, status=status)

    def _retried(self, body: bytes) -> bool:
        return self.hook.retried is None or self.hook.retried(body)


def _delivered(status: int | None) -> bool:
    return status is not None and 200 <= status < 300


@dataclass(frozen=True, slots=True)
class Posting:
    """One POST and what it is sent with; each attempt takes a slot of ``limit``."""

    session: aiohttp.ClientSession
    limit: asyncio.Semaphore
    url: URL
    body: bytes
    headers: dict[str, str]

    async def once(self) -> int | None:
        async with self.limit:
            try:
                async with self.session.post(
                    self.url, data=self.body, headers=self.headers, allow_redirects=False
                ) as answer:
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

    app.cleanup_ctx.append(running(emitter.run))

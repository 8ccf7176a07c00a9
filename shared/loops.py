"""Background loops that log and continue: a Redis blip or a provider outage costs a log
line and a capped backoff, never a crashed worker. :func:`named_loop` turns a step into a
worker for :func:`shared.service.serve`; its name is what a log says when a loop ends."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from redis.exceptions import RedisError

from shared import metrics
from shared.logging import event
from shared.providers.base import ProviderUnavailable
from shared.redis import TRANSIENT_ERRORS
from shared.service import Worker, sleep_or_stop

log = logging.getLogger(__name__)
ERRORS = (RedisError, ProviderUnavailable, *TRANSIENT_ERRORS)

Step = Callable[[], Awaitable[float]]


def cap_advised_wait(seconds: float, maximum: float, loop: str) -> float:
    """``seconds`` as the provider advised, but never more than ``maximum`` (counted and
    logged: a provider asking for longer is news for whoever reads the dashboard)."""
    if seconds <= maximum:
        return seconds
    metrics.advised_wait_capped.labels(loop).inc()
    event(log, logging.WARNING, "provider advised a wait beyond the maximum; capped",
          loop=loop, advised_s=round(seconds), capped_to_s=maximum)  # fmt: skip
    return maximum


async def resilient(service: str, name: str, stop: asyncio.Event, step: Step) -> None:
    """Run ``step`` until ``stop``; it returns how long to wait before it runs again."""
    backoff = 0.1
    while not stop.is_set():
        try:
            delay = await step()
            backoff = 0.1
        except ERRORS as error:
            event(
                log,
                logging.WARNING,
                "loop error; retrying",
                loop=name,
                error=type(error).__name__,
                retry_in_s=backoff,
            )
            if not isinstance(error, ProviderUnavailable):
                metrics.redis_up.labels(service).set(0)
            delay, backoff = backoff, min(backoff * 2, 5.0)
        except Exception:
            # A bug in one step must not end the loop (and with it the process, then a crash
            # loop on the same input): log it loudly and try again later.
            log.exception("loop step failed unexpectedly", extra={"fields": {"loop": name}})
            delay, backoff = max(backoff, 1.0), min(backoff * 2, 30.0)
        if delay:
            await sleep_or_stop(stop, delay)


def named_loop(service: str, name: str, step: Step) -> Worker:
    """A worker that runs ``step`` through :func:`resilient` until shutdown."""

    async def loop(stop: asyncio.Event) -> None:
        await resilient(service, name, stop, step)

    return named(name, loop)


def named(name: str, worker: Callable[[asyncio.Event], Awaitable[Any]]) -> Worker:
    """``worker`` under ``name``, the task name :func:`shared.service.serve` logs when a
    worker ends before shutdown (a lambda or a partial would log as ``<lambda>``)."""

    async def run(stop: asyncio.Event) -> None:
        await worker(stop)

    run.__name__ = name
    return run

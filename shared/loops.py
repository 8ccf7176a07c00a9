"""Background loops that log and continue: a Redis blip or a provider outage costs a log
line and a capped backoff, never a crashed worker.

Every background loop of every service is built one way, :func:`named_loop`: a step (which
returns how long to wait before it runs again) becomes a worker for
:func:`shared.service.serve`, under one name: the task's (what serve logs when a worker
ends early) and the ``loop`` field of every line the loop logs."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, nullcontext
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
# The step of a loop that needs the shutdown event, or something held open while it runs (a
# client, a count of running readers, a lease released once it ends): entered with the
# event, it yields the step.
Opened = Callable[[asyncio.Event], AbstractAsyncContextManager[Step]]


def cap_advised_wait(seconds: float, maximum: float, loop: str) -> float:
    """``seconds`` as the provider advised, but never more than ``maximum`` (counted and
    logged: a provider asking for longer is news for whoever reads the dashboard)."""
    if seconds <= maximum:
        return seconds
    metrics.advised_wait_capped.labels(loop).inc()
    event(
        log,
        logging.WARNING,
        "provider advised a wait beyond the maximum; capped",
        loop=loop,
        advised_s=round(seconds),
        capped_to_s=maximum,
    )
    return maximum


def named_loop(
    service: str, name: str, step: Step | None = None, *, opened: Opened | None = None
) -> Worker:
    """A worker that runs ``step`` (or the one ``opened`` yields) until shutdown."""
    if step is not None and opened is None:
        enter = _holding(step)
    elif opened is not None and step is None:
        enter = opened
    else:
        raise TypeError("named_loop takes a step or opened, one of them")

    async def loop(stop: asyncio.Event) -> None:
        async with enter(stop) as each:
            await _resilient(service, name, stop, each)

    return named(name, loop)


def _holding(step: Step) -> Opened:
    """A plain step as a loop that holds nothing open."""

    def enter(_stop: asyncio.Event) -> AbstractAsyncContextManager[Step]:
        return nullcontext(step)

    return enter


async def _resilient(service: str, name: str, stop: asyncio.Event, step: Step) -> None:
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


def named(name: str, worker: Callable[[asyncio.Event], Awaitable[Any]]) -> Worker:
    """``worker`` under ``name``, the task name :func:`shared.service.serve` logs when a
    worker ends before shutdown (a lambda or a partial would log as ``<lambda>``): for a
    worker that is not a loop of steps (a listener, the attempt workers)."""

    async def run(stop: asyncio.Event) -> None:
        await worker(stop)

    run.__name__ = name
    return run

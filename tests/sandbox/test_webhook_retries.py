"""Each provider mode retries a failed webhook POST on its provider's documented schedule
(``RETRIES`` in services/sandbox/dialects/<provider>.py, beside the page it came from), time
scaled by ``webhook_retry_scale``:

- Mailgun: 5 min, 10 min, 15 min, 1 h, 2 h, 4 h; a 406 ends it
  (documentation.mailgun.com/docs/mailgun/user-manual/webhooks/webhook-retries);
- Postmark: 1, 5, 15, 1, 5, 10, 10, 10, 15 min; a 4xx other than 408 and 429 ends it
  (github.com/ActiveCampaign/postmark-skills, postmark-webhooks/SKILL.md);
- SendGrid: "at increasing intervals for up to 24 hours", intervals undocumented, emulated
  by doubling from 1 min (twilio.com/docs/sendgrid/for-developers/tracking-events/
  troubleshooting).

A receiver that fails N times sees the retries at the scaled documented times, counted from
the first POST (bounds: never early, at most ``SLACK`` late); one that always fails sees
exactly 1 + len(RETRIES) POSTs and then nothing more.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from itertools import accumulate

import aiohttp
import pytest
from aiohttp import web

from services.poller.inbound import mailgun as mailgun_inbound
from services.sandbox.dialects import mailgun, postmark, sendgrid
from tests.e2e.conftest import poll
from tests.providers.kinds import adapter
from tests.support.sandbox import run_sandbox, sandbox_stats
from tests.support.webhooks import hook_receiver

MESSAGE = {
    "from": "no-reply@game.example",
    "to": ["p@example.com"],
    "subject": "Reset",
    "text": "link",
    "html": "",
}
# Scales that put each whole schedule in a few seconds (Mailgun's 7.5 h in 2.7 s, Postmark's
# 72 min in 2.2 s, SendGrid's 24 h in 1.7 s).
SCALES = {"mailgun": 1e-4, "postmark": 5e-4, "sendgrid": 2e-5}
RETRIES = {"mailgun": mailgun.RETRIES, "postmark": postmark.RETRIES, "sendgrid": sendgrid.RETRIES}
EARLY = 0.005  # clocks and sleeps: a retry may not come sooner than its wait, minus this
SLACK = 0.5  # each POST's own time on a loaded 2-core machine, accumulated


@dataclass
class Receiver:
    url: str = ""
    statuses: list[int] = field(default_factory=list)  # answered in turn; then `then`
    then: int = 200
    arrivals: list[float] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.Response:
        await request.read()
        self.arrivals.append(time.monotonic())
        return web.Response(status=self.statuses.pop(0) if self.statuses else self.then)

    def offsets(self) -> list[float]:
        return [t - self.arrivals[0] for t in self.arrivals[1:]]


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    state = Receiver()
    async with hook_receiver(state.handle, "user:password") as url:
        state.url = url
        yield state


def settings(kind: str, receiver: Receiver) -> dict[str, object]:
    """One POST per send: the acceptance event (SendGrid, Mailgun; their delivery is an hour
    away) or Postmark's delivery record (it has no acceptance webhook)."""
    delay = 0.01 if kind == "postmark" else 3600
    return {
        "mode": kind,
        "webhook_url": receiver.url,
        "webhook_signing_key": "k" * 32,
        "delivered_delay_seconds": delay,
        "webhook_retry_scale": SCALES[kind],
    }


async def hooks_when(url: str, done: str) -> dict[str, int]:
    async def probe() -> dict[str, int] | None:
        hooks: dict[str, int] = (await sandbox_stats(url))["webhooks"]
        return hooks if hooks[done] else None

    return dict(await poll(probe, timeout=20))


def assert_on_schedule(kind: str, offsets: list[float]) -> None:
    expected = [t * SCALES[kind] for t in accumulate(RETRIES[kind])][: len(offsets)]
    for n, (seen, due) in enumerate(zip(offsets, expected, strict=True), start=1):
        assert due - EARLY <= seen <= due + SLACK, (kind, n, seen, due, offsets)


@pytest.mark.parametrize("kind", sorted(SCALES))
async def test_a_receiver_failing_n_times_sees_the_retries_at_the_documented_times(
    kind: str, receiver: Receiver
) -> None:
    failures = 3
    receiver.statuses = [503] * failures
    async with run_sandbox(**settings(kind, receiver)) as url, aiohttp.ClientSession() as s:
        await adapter(kind, s, url).send(f"op-retry-{kind}", MESSAGE)
        hooks = await hooks_when(url, "posted")
    assert len(receiver.arrivals) == failures + 1
    assert_on_schedule(kind, receiver.offsets())
    assert (hooks["retried"], hooks["posted"], hooks["refused"]) == (failures, 1, 0)


@pytest.mark.parametrize("kind", sorted(SCALES))
async def test_the_sandbox_stops_retrying_at_the_documented_end(
    kind: str, receiver: Receiver
) -> None:
    receiver.then = 500
    async with run_sandbox(**settings(kind, receiver)) as url, aiohttp.ClientSession() as s:
        await adapter(kind, s, url).send(f"op-end-{kind}", MESSAGE)
        hooks = await hooks_when(url, "refused")
        last_wait = RETRIES[kind][-1] * SCALES[kind]
        await asyncio.sleep(last_wait + 0.2)  # another retry, if one were coming, has come
    assert len(receiver.arrivals) == 1 + len(RETRIES[kind]), receiver.offsets()
    assert_on_schedule(kind, receiver.offsets())
    assert (hooks["retried"], hooks["refused"]) == (len(RETRIES[kind]), 1)


@pytest.mark.parametrize(
    ("kind", "status"), [("mailgun", 406), ("postmark", 403), ("postmark", 422)]
)
async def test_a_documented_final_answer_stops_the_retries(
    kind: str, status: int, receiver: Receiver
) -> None:
    receiver.then = status
    async with run_sandbox(**settings(kind, receiver)) as url, aiohttp.ClientSession() as s:
        await adapter(kind, s, url).send(f"op-final-{kind}", MESSAGE)
        hooks = await hooks_when(url, "refused")
        await asyncio.sleep(RETRIES[kind][0] * SCALES[kind] + 0.2)  # the first retry's time
    assert len(receiver.arrivals) == 1
    assert (hooks["retried"], hooks["refused"]) == (0, 1)


async def test_postmark_retries_its_temporary_4xx(receiver: Receiver) -> None:
    """408 and 429 are "Temporary" in Postmark's table: retried like a 5xx."""
    receiver.statuses = [408, 429]
    async with run_sandbox(**settings("postmark", receiver)) as url, aiohttp.ClientSession() as s:
        await adapter("postmark", s, url).send("op-temporary", MESSAGE)
        hooks = await hooks_when(url, "posted")
    assert len(receiver.arrivals) == 3 and hooks["retried"] == 2
    assert_on_schedule("postmark", receiver.offsets())


def test_mailguns_retries_end_inside_the_age_the_poller_believes() -> None:
    """Mailgun retries with the signature first made: the poller must still believe the
    last retry's timestamp, or every late retry is refused."""
    assert sum(mailgun.RETRIES) <= mailgun_inbound.RETRY_HORIZON_SECONDS

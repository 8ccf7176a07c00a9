"""Every number a provider sends is parsed defensively: non-finite, negative and absurd
values neither raise nor reach arithmetic unbounded (a SendGrid 429 with
``X-RateLimit-Reset: -inf`` raised OverflowError before it was finalised, and ``1e308``
raised the same in the pacer, so the attempt's lease ran out and the operation went to
review). The rate-limit headers are SendGrid's
(https://www.twilio.com/docs/sendgrid/api-reference/how-to-use-the-sendgrid-v3-api/rate-limits).
"""

from __future__ import annotations

import math
import random
import time
from datetime import UTC, datetime

import aiohttp
import orjson
import pytest

from services.sender import pacing
from services.sender.policy import RetryPolicy, decide
from shared.model import Outcome, State
from shared.providers.base import SendResult
from shared.rate_signal import MAX_RESET_SECONDS
from shared.retry_after import MAX_DELAY_MS, parse
from tests.providers.conftest import Scripted
from tests.providers.kinds import JSON, adapter

MESSAGE = {
    "from": "Recovery <no-reply@game.example>",
    "to": ["p@example.com"],
    "subject": "Reset",
    "text": "link",
}
SG_ERR = orjson.dumps({"errors": [{"field": None, "message": "too many requests"}]})
HOSTILE = ["-inf", "inf", "nan", "1e308", "1e400", "-5", "-1e308", "0x10", "9" * 400]
POLICY = RetryPolicy(6, 500, 60_000, 1000)


async def _send_429(scripted: Scripted, headers: dict[str, str]) -> SendResult:
    scripted.script((429, {**JSON, **headers}, SG_ERR))
    async with aiohttp.ClientSession() as session:
        return await adapter("sendgrid", session, scripted.url).send("op-1-ABC", MESSAGE)


@pytest.mark.parametrize("value", HOSTILE)
async def test_a_hostile_ratelimit_reset_is_a_throttle_the_sender_can_finalise(
    scripted: Scripted, value: str
) -> None:
    result = await _send_429(scripted, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": value})
    assert result.outcome is Outcome.THROTTLED
    now = int(time.time() * 1000)
    seen = pacing.observe(result, now, now, floor=0.1, no_advice_ms=200)
    assert now <= seen.blocked_until <= now + MAX_RESET_SECONDS * 1000 + 1000
    advice = parse(result.retry_after, datetime.now(UTC), result.server_date)
    final = decide(
        Outcome.THROTTLED,
        429,
        attempt=1,
        now=now,
        horizon_at=now + 3_600_000,
        policy=POLICY,
        rng=random.Random(0),
        retry_after=advice,
    )
    assert final.next_state == State.DEFERRED
    assert final.retry_at - now <= min(MAX_DELAY_MS, POLICY.max_advised_wait_ms)


@pytest.mark.parametrize("value", HOSTILE)
async def test_a_hostile_ratelimit_remaining_never_makes_an_unbounded_hint(
    scripted: Scripted, value: str
) -> None:
    reset = str(int(time.time()) + 5)
    result = await _send_429(
        scripted,
        {"X-RateLimit-Remaining": value, "X-RateLimit-Reset": reset, "X-RateLimit-Limit": value},
    )
    now = int(time.time() * 1000)
    seen = pacing.observe(result, now, now, floor=0.1, no_advice_ms=200)
    assert math.isfinite(seen.hint) and seen.hint < 1e9

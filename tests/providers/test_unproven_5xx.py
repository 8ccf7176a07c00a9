"""A 5xx after the send was written, from SendGrid, Postmark or Mailgun (no idempotency key):
one email, never a blind resend. On real processes: redis-server, the sandbox speaking each
provider's API, admission, sender and poller (with its webhook listener).

The sandbox records the email and then answers (``late_error_every``) either 502 with a
gateway's page — what a load balancer in front of the provider answers when the provider took
the message and the answer was lost — or the provider's own documented error body with a 500
or a 408 (``late_error_shape`` "provider": SendGrid's ``{"errors": [{"message"}]}`` on
twilio.com/docs/sendgrid/api-reference/how-to-use-the-sendgrid-v3-api/errors, Postmark's
``{"ErrorCode", "Message"}`` on postmarkapp.com/developer/api/overview, Mailgun's
``{"message"}`` on documentation.mailgun.com/docs/mailgun/quickstart-guide/responses). None of
those pages says such an answer means the mail was not taken, so after the body was written it
proves nothing: no blind resend, whatever the body says.

The attempt is ambiguous and is settled as the capabilities allow: SendGrid by its
``processed`` webhook, Mailgun by its ``accepted`` webhook or its found-only lookup, Postmark
by its found-only search.

One stack per provider; each answer is set on its running sandbox (``/_sandbox/config``)
before its example, as a stack per (provider, answer) cost six more stacks of processes.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from services.ctl.embedded import RedisServer
from tests.e2e.conftest import E2E, pushed_events_stack
from tests.support.sandbox import configure, sandbox_stats

PROVIDERS = ("sendgrid", "postmark", "mailgun")
# What answers after the provider took the mail: (shape, status).
ANSWERS = {
    "gateway-502": ("gateway", 502),
    "provider-500": ("provider", 500),
    "provider-408": ("provider", 408),
}
SETTLED = {"accepted", "exhausted", "review", "failed"}


@pytest.fixture(scope="module")
def keyless_redis() -> Iterator[RedisServer]:
    server = RedisServer(appendonly=True, appendfsync="always").start()
    yield server
    server.stop()


@pytest.fixture(scope="module", params=PROVIDERS)
async def stack(request: Any, keyless_redis: RedisServer) -> AsyncIterator[tuple[E2E, str]]:
    provider = request.param
    logs = Path(tempfile.mkdtemp(prefix=f"rg-5xx-{provider}-"))
    sandbox = {"late_error_every": 1, "delivered_delay_seconds": 0.5}
    async with pushed_events_stack(
        keyless_redis.url, provider, logs, sandbox, RESETGATE_MAILGUN_EVENTS_DELAY_SECONDS="1"
    ) as e2e:
        yield e2e, provider


@pytest.mark.parametrize("answer", ANSWERS)
async def test_a_5xx_after_the_write_sends_one_email_and_is_settled_accepted(
    stack: tuple[E2E, str], answer: str
) -> None:
    e2e, provider = stack
    shape, status = ANSWERS[answer]
    await configure(e2e.provider_url, late_error_shape=shape, late_error_status=status)
    late_before = (await sandbox_stats(e2e.provider_url))["late_errors_total"]
    account = f"late-5xx-{provider}-{answer}"
    await e2e.account(account)
    op = await e2e.admit(account)
    view = await e2e.until(op, lambda v: v["state"] in SETTLED, timeout=45)
    await asyncio.sleep(1.5)  # a retry, if one were coming, has had its backoff (0.5 s cap)
    stats = await sandbox_stats(e2e.provider_url, operation_id=op)
    assert stats["late_errors_total"] > late_before, stats
    assert stats["sent_by_operation"][op] == 1, (view, stats["sent_by_operation"])
    assert view["state"] == "accepted", view

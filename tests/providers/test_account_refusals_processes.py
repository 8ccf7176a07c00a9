"""Account refusals on real processes: redis-server, admission and the sender (each
``python -m services.<name>``), the provider as a process of its own (the sandbox speaking
Mailgun, Postmark or SendGrid; moto for SES), and the real ``resetgate ops provider-resume``.
One documented refusal per provider kind pauses that provider with its own words (the
control record every sender and ``ops status`` read): no email, no operation failed, each
waits queued; once the account is fixed and the pause lifted, every operation is accepted
once (0 failed, 0 exhausted).

The refusals and their pages: Mailgun 404 "Domain not found: …"
(documentation.mailgun.com/docs/mailgun/quickstart-guide/responses), Postmark's 422 ErrorCode
300 "Invalid 'From' address: … is not a verified sender signature"
(postmarkapp.com/support/article/troubleshooting-422-unprocessable-entity-errors), SendGrid's
403 for an unverified Sender Identity
(twilio.com/docs/sendgrid/api-reference/how-to-use-the-sendgrid-v3-api/responses), SES
``MessageRejected`` "Email address is not verified", as moto answers it
(docs.aws.amazon.com/ses/latest/APIReference/API_SendEmail.html). One refusal per kind here
(each example starts its provider and a sender); every documented refusal of the sandbox's
dialects is also an in-process example in test_account_refusals.py.

One redis-server and one admission process serve the four examples: admission never calls
the provider (the operations are admitted through its internal API, which spends no provider
budget), so only the provider and the sender, which do, are started per kind.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from services.ctl.embedded import RedisServer
from shared.control import read as read_control
from tests.ctl.test_ops import ops
from tests.e2e.conftest import E2E, SENDER_ENV, poll, service_env
from tests.support.moto_server import AWS_ENV, aws_client, moto_server
from tests.support.ports import refused_url
from tests.support.processes import Processes, ServiceProcess
from tests.support.sandbox import configure, run_sandbox_process, sandbox_stats

# The sender as SENDER_ENV has it but with the default provider timeouts and lease: moto
# answered SES's refusal after the 2 s total timeout on a loaded machine (a fresh-clone run),
# which made the send ambiguous instead of refused; timeouts are not what this test is about.
REFUSAL_SENDER_ENV = {
    name: value
    for name, value in SENDER_ENV.items()
    if "TIMEOUT" not in name and name != "RESETGATE_LEASE_SECONDS"
}

REFUSALS = [
    ("mailgun", "domain_not_found", "Domain not found"),
    ("postmark", "from_not_signature", "not a verified sender signature"),
    ("sendgrid", "sender_not_verified", "verified Sender Identity"),
    ("ses", "unverified_identity", "not verified"),
]
N = 3
SETTLED = {"accepted", "failed", "exhausted", "review"}


@pytest.fixture(scope="module")
def durable_redis() -> Iterator[RedisServer]:
    """Fsync'd as the sender demands when a provider (here all but SendGrid's) takes no
    idempotency key. Each example's accounts, operations and pause are its kind's own."""
    server = RedisServer(appendonly=True, appendfsync="always").start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
async def admission(durable_redis: RedisServer) -> AsyncIterator[ServiceProcess]:
    """The four examples' admission; its provider URL refuses connections (never called)."""
    logs = Path(tempfile.mkdtemp(prefix="rg-refusal-admission-"))
    with refused_url() as url:
        async with Processes(logs, service_env(durable_redis.url, url)) as processes:
            yield await processes.start("admission")


@contextlib.asynccontextmanager
async def provider(kind: str, refusal: str, logs: Path) -> AsyncIterator[str]:
    """The provider's URL, refusing: a sandbox answering the refusal, or moto (where the
    sender's From identity is not verified until the test verifies it)."""
    if kind == "ses":
        async with moto_server(logs) as endpoint:
            yield endpoint
        return
    async with run_sandbox_process(mode=kind, refusal=refusal) as url:
        yield url


async def fix_the_account(kind: str, url: str) -> None:
    if kind == "ses":
        async with aws_client("ses", url) as ses:
            await ses.verify_domain_identity(Domain="game.example")  # the sender's From
        return
    await configure(url, refusal="")


async def emails_sent(kind: str, url: str) -> int:
    if kind == "ses":
        async with aws_client("ses", url) as ses:
            return int((await ses.get_send_quota())["SentLast24Hours"])
    return int((await sandbox_stats(url))["emails_sent_total"])


@contextlib.asynccontextmanager
async def stack(
    kind: str, refusal: str, server: RedisServer, admission: ServiceProcess
) -> AsyncIterator[E2E]:
    """The provider and a sender of this kind beside the shared admission; the sender
    stopped on exit, admission left running."""
    logs = Path(tempfile.mkdtemp(prefix=f"rg-refusal-{kind}-"))
    async with provider(kind, refusal, logs) as url:
        base = {
            **service_env(server.url, url),
            **AWS_ENV,
            "RESETGATE_PROVIDER_KIND": kind,
            "RESETGATE_PROVIDER_NAME": kind,
            "RESETGATE_MAILGUN_DOMAIN": "mg.game.example",
            "RESETGATE_MAILGUN_EVENTS_DELAY_SECONDS": "0",
        }
        async with Processes(logs, base) as own:
            await own.start("sender", **REFUSAL_SENDER_ENV)
            both = Processes(logs, base)  # a view for E2E: never entered, stops nothing
            both.services = {"admission": admission, **own.services}
            redis = Redis.from_url(server.url, decode_responses=True)
            try:
                yield E2E(both, redis, url)
            finally:
                await redis.aclose()


@pytest.mark.parametrize(("kind", "refusal", "words"), REFUSALS)
async def test_an_account_refusal_pauses_the_sender_process_and_the_cli_resume_delivers(
    kind: str, refusal: str, words: str, durable_redis: RedisServer, admission: ServiceProcess
) -> None:
    async with stack(kind, refusal, durable_redis, admission) as e2e:
        accounts = [f"refused-{kind}-{i}" for i in range(N)]
        for account in accounts:
            await e2e.account(account)
        ops_ids = [await e2e.admit(account) for account in accounts]

        async def paused() -> dict[str, object] | None:
            return (await read_control(e2e.redis)).auth_paused.get(kind)

        note = await poll(paused, timeout=30)
        assert note["kind"] == "account" and words in str(note["reason"]), note
        assert "@" not in str(note["reason"]), "no address in the pause"
        # The attempt that met the refusal goes back to the queue, refunded: nothing failed.
        views = [
            await e2e.until(op, lambda v: v["state"] != "attempting", timeout=60) for op in ops_ids
        ]
        assert {v["state"] for v in views} == {"queued"}, views
        assert await emails_sent(kind, e2e.provider_url) == 0
        await fix_the_account(kind, e2e.provider_url)
        resumed = await asyncio.to_thread(ops, durable_redis, "provider-resume", "--provider", kind)
        assert resumed.returncode == 0 and "account pause lifted" in resumed.stdout, resumed
        done = [await e2e.until(op, lambda v: v["state"] in SETTLED, timeout=30) for op in ops_ids]
        sent = await emails_sent(kind, e2e.provider_url)
        assert all(s.running for s in e2e.processes.services.values()), "a service died"
    assert [d["state"] for d in done] == ["accepted"] * N, done  # 0 failed, 0 exhausted
    assert sent == N, "each operation emailed once"

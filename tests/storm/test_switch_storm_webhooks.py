"""A switch storm between two providers of the same webhook kind: two SendGrid accounts (a
studio's primary ``a`` and standby ``b``), each signing its Event Webhook with its own key
and posting to its own path on the poller (``/webhooks/a``, ``/webhooks/b``).

Real processes: a redis-server (fsync always: SendGrid has no idempotency key), two sandboxes
in SendGrid mode (services/sandbox/dialects/sendgrid.py: Mail Send, its 429, and the Event
Webhook signed with ECDSA as twilio.com/docs/sendgrid/for-developers/tracking-events/
getting-started-event-webhook-security-features describes; each sandbox makes its own key
pair, read by the poller's operator from the documented
api-reference/webhooks/get-signed-event-webhooks-public-key route), admission, a poller with
``RESETGATE_PROVIDER_A_SENDGRID_WEBHOOK_PUBLIC_KEY`` / ``..._B_...``, and a sender.

``a`` takes a tenth of the sender's rate and answers the rest 429; mid-run the CLI moves
half the partitions to ``b``. Judged by the sandboxes' own counts and the poller's metrics:
every operation emailed exactly once, none lost, each delivered as its own provider's webhook
reported it (the events each path carried match the operations each provider holds, none
refused and none about an operation another provider holds), and operations deferred by
``a``'s 429s handed over to ``b``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from redis.asyncio import Redis

from benchmarks.storm import INTERNAL_TOKEN, TOKEN_KEYS, live_count, seed_directory, wait_until
from services.ctl.embedded import RedisServer, free_port
from shared.model import Delivery, State
from shared.operations import load_attempts, load_operation
from tests.storm.test_switch_storm import NAMES, Result, admit, switch
from tests.support.processes import Processes, ServiceProcess
from tests.support.sandbox import SANDBOX_API_KEY, run_sandbox_process, sandbox_stats
from tests.support.webhooks import sendgrid_public_key

STARTUP_SECONDS = 90.0
N = 200
RATE = 40.0


@dataclass
class Hooks:
    owned: dict[str, int] = field(default_factory=dict)  # provider -> operations it holds
    delivered_events: dict[str, float] = field(default_factory=dict)  # path -> events
    refused: float = 0.0  # webhook requests answered 401
    other_provider: float = 0.0  # events about an operation another provider holds
    handovers: int = 0  # deferred by a's 429s, then sent by b
    problems: list[str] = field(default_factory=list)


def services_env(
    redis_url: str, urls: dict[str, str], keys: dict[str, str], port: int
) -> dict[str, str]:
    env = {
        "RESETGATE_REDIS_URL": redis_url,
        "RESETGATE_PROVIDERS": ",".join(NAMES),
        "RESETGATE_PROVIDER_MAX_RATE": str(RATE),
        "RESETGATE_TOKEN_KEYS": TOKEN_KEYS,
        "RESETGATE_INTERNAL_API_TOKEN": INTERNAL_TOKEN,
        "RESETGATE_WEBHOOK_PORT": str(port),
        "RESETGATE_BACKOFF_BASE_SECONDS": "0.2",
        "RESETGATE_BACKOFF_CAP_SECONDS": "2",
    }
    for name, url in urls.items():
        infix = f"RESETGATE_PROVIDER_{name.upper()}"
        env |= {
            f"{infix}_KIND": "sendgrid",
            f"{infix}_URL": url,
            f"{infix}_API_KEY": SANDBOX_API_KEY,
            f"{infix}_SENDGRID_WEBHOOK_PUBLIC_KEY": keys[name],
        }
    return env


async def judge(
    client: Redis, ops: list[str], sent: dict[str, dict[str, int]], hooks: Hooks
) -> None:
    for op in ops:
        operation = await load_operation(client, op)
        emails = {name: sent[name].get(op, 0) for name in NAMES}
        if operation is None or operation.state != State.ACCEPTED or sum(emails.values()) != 1:
            hooks.problems.append(f"{op}: {operation and operation.state} emails {emails}")
            continue
        owner = operation.provider
        hooks.owned[owner] = hooks.owned.get(owner, 0) + 1
        if emails[owner] != 1 or operation.delivery is not Delivery.DELIVERED:
            hooks.problems.append(f"{op}: owner {owner}, emails {emails}, {operation.delivery}")
        attempts = await load_attempts(client, op)
        if owner == "b" and any(a.provider == "a" and a.outcome == "throttled" for a in attempts):
            hooks.handovers += 1


async def delivered(client: Redis, ops: list[str]) -> bool:
    for op in ops:
        operation = await load_operation(client, op)
        if operation is None or operation.delivery is Delivery.UNKNOWN:
            return False
    return True


async def read_metrics(poller: ServiceProcess, hooks: Hooks) -> None:
    for name in NAMES:
        hooks.delivered_events[name] = await poller.metric(
            "resetgate_inbound_events_total", provider=name, kind="delivered"
        )
        hooks.refused += await poller.metric(
            "resetgate_webhook_requests_total", provider=name, status="401"
        )
        hooks.other_provider += await poller.metric(
            "resetgate_inbound_events_dropped_total", provider=name, reason="other_provider"
        )


async def storm(tmp_path: Path) -> Hooks:
    hooks = Hooks()
    server = RedisServer(appendonly=True, appendfsync="always").start()
    client = Redis.from_url(server.url, decode_responses=True)
    port = free_port()
    sandbox = {"mode": "sendgrid", "delivered_delay_seconds": 0.5, "log_level": "WARNING"}
    try:
        await seed_directory(client, N)
        async with (
            # a refuses every send for its first 4 s (429s), so operations it deferred are
            # still waiting when their partitions move to b.
            run_sandbox_process(
                STARTUP_SECONDS,
                seed=7,
                send_rate_per_second=RATE / 10,
                send_burst=2,
                send_blackout_seconds=4,
                webhook_url=f"http://127.0.0.1:{port}/webhooks/a",
                **sandbox,
            ) as a_url,
            run_sandbox_process(
                STARTUP_SECONDS,
                seed=8,
                webhook_url=f"http://127.0.0.1:{port}/webhooks/b",
                **sandbox,
            ) as b_url,
        ):
            urls = {"a": a_url, "b": b_url}
            keys = {name: await sendgrid_public_key(url) for name, url in urls.items()}
            env = services_env(server.url, urls, keys, port)
            async with Processes(tmp_path, env) as stack:
                admission = await stack.start("admission", STARTUP_SECONDS)
                poller = await stack.start("poller", STARTUP_SECONDS)
                await stack.start("sender", STARTUP_SECONDS)
                ops = await admit(admission.url, range(N))
                await asyncio.sleep(1.0)  # a's 429s are deferring operations by now
                await switch(env, "0-7", "b", Result(N))

                async def drained() -> bool:
                    return await live_count(client) == 0

                if not await wait_until(drained, timeout=300):
                    hooks.problems.append(f"not drained: {await live_count(client)} live")
                if not await wait_until(lambda: delivered(client, ops), timeout=120):
                    hooks.problems.append("not every delivery event arrived")
                await read_metrics(poller, hooks)
            sent = {
                name: (await sandbox_stats(url))["sent_by_operation"] for name, url in urls.items()
            }
        await judge(client, ops, sent, hooks)
    finally:
        await client.aclose()
        server.stop()
    return hooks


@pytest.mark.slow  # a minute of real processes: `make test-slow`
@pytest.mark.timeout(600)
async def test_two_sendgrid_accounts_switch_mid_run_each_event_joined_to_its_provider(
    tmp_path: Path,
) -> None:
    hooks = await storm(tmp_path)
    print(
        f"same-kind switch storm: {N} operations; owners {hooks.owned}; delivered events per "
        f"path {hooks.delivered_events}; refused {hooks.refused}; other-provider "
        f"{hooks.other_provider}; handed over after 429s {hooks.handovers}; problems "
        f"{len(hooks.problems)}"
    )
    assert hooks.problems == [], hooks.problems[:20]
    assert sum(hooks.owned.values()) == N and set(hooks.owned) == set(NAMES), hooks.owned
    # Each path carried the delivered events of exactly the operations its provider holds.
    assert hooks.delivered_events == {n: float(hooks.owned[n]) for n in NAMES}
    assert hooks.refused == 0 and hooks.other_provider == 0
    assert hooks.handovers > 0, "no operation deferred by a's 429s was sent by b"

"""Invariant 6 on real processes: an attempt whose outcome is unknown is reconciled by the
poller (lookup by idempotency key) with no second email, whether the connection dropped
after the provider sent it or the sender was SIGKILLed with the request in flight."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import E2E, poll
from tests.support.sandbox import configure, sandbox_stats

pytestmark = pytest.mark.cluster_pass  # also on a Redis Cluster: make test-cluster


async def one_email(live: E2E, op: str) -> None:
    stats = await sandbox_stats(live.provider_url, operation_id=op)
    assert stats["sent_by_operation"][op] == 1
    assert stats["duplicate_sends_total"] == 0
    assert stats["idempotency_body_mismatches_total"] == 0


async def test_invariant_6_dropped_connection_is_reconciled_without_a_second_email(
    live: E2E,
) -> None:
    await configure(live.provider_url, drop_every=1)
    await live.account("e2e-drop")
    op = await live.admit("e2e-drop")
    await live.until(
        op, lambda v: v["attempt_ledger"] and v["attempt_ledger"][0]["outcome"] == "ambiguous"
    )
    await configure(live.provider_url, drop_every=0)
    view = await live.until(op, lambda v: v["delivery"] == "delivered")
    assert view["state"] == "accepted" and view["provider_message_id"]
    assert [(a["outcome"], a["reconciled"]) for a in view["attempt_ledger"]] == [
        ("ambiguous", "accepted")
    ]
    await one_email(live, op)


async def test_invariant_6_killed_sender_is_reconciled_without_a_second_email(
    live: E2E,
) -> None:
    # The provider takes 3 s; the sender dies 'mid-request'. Its lease (5 s) runs out, the
    # restarted sender's XAUTOCLAIM finds the attempt in flight and marks it ambiguous, and
    # the poller asks the provider, which did send it.
    await configure(live.provider_url, slow_every=1, slow_seconds=3)
    sender = live["sender"]
    await live.account("e2e-killed")
    op = await live.admit("e2e-killed")

    async def in_flight() -> bool:
        return bool((await sandbox_stats(live.provider_url))["in_flight"])

    await poll(in_flight, timeout=10)
    await sender.kill()
    await configure(live.provider_url, slow_every=0)
    await sender.start(RESETGATE_LEASE_SECONDS="5")
    view = await live.until(op, lambda v: v["delivery"] == "delivered", timeout=30)
    assert view["state"] == "accepted"
    outcomes = [(a["outcome"], a["reason"], a["reconciled"]) for a in view["attempt_ledger"]]
    assert outcomes == [("ambiguous", "lease_expired", "accepted")]
    await one_email(live, op)

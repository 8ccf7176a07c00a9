"""End to end on real processes: admission -> sender -> sandbox -> poller.

Invariant 7 as an operator sees it through the internal API: accepted by the transport
and observed delivery are separate; delivery is "unknown" until an event says otherwise,
and stays "unknown" (window closed) when none comes.
"""

from __future__ import annotations

import pytest

from tests.e2e.conftest import E2E, poll
from tests.support.sandbox import configure, sandbox_stats

pytestmark = pytest.mark.cluster_pass  # also on a Redis Cluster: make test-cluster


def accepted(view: dict[str, object]) -> bool:
    return view["state"] == "accepted"


async def test_invariant_7_delivery_unknown_while_pending_then_delivered(live: E2E) -> None:
    await live.account("e2e-delivered")
    op = await live.admit("e2e-delivered")
    view = await live.until(op, accepted)
    # The sandbox reports delivery 1.5 s after acceptance: until then nobody knows.
    assert view["delivery"] == "unknown"
    assert view["delivery_observed_at"] is None and view["observation_closed_at"] is None
    view = await live.until(op, lambda v: v["delivery"] == "delivered")
    assert view["state"] == "accepted" and view["delivery_observed_at"]
    assert [a["outcome"] for a in view["attempt_ledger"]] == ["accepted"]


async def test_bounce_is_observed_as_bounced(live: E2E) -> None:
    await live.account("e2e-bounce", domain="bounce.example")
    op = await live.admit("e2e-bounce")
    view = await live.until(op, lambda v: v["delivery"] == "bounced")
    assert view["state"] == "accepted"
    stats = await sandbox_stats(live.provider_url, operation_id=op)
    assert stats["sent_by_operation"][op] == 1


async def test_duplicated_and_out_of_order_events_leave_delivered(live: E2E) -> None:
    await configure(live.provider_url, duplicate_event_every=1, out_of_order_every=1)
    poller = live["poller"]
    duplicates = await poller.metric("resetgate_delivery_events_duplicate_total")
    deferred = await poller.metric("resetgate_delivery_events_total", type="deferred")
    await live.account("e2e-disorder")
    op = await live.admit("e2e-disorder")
    await live.until(op, lambda v: v["delivery"] == "delivered")

    async def both_seen() -> bool:
        return (
            await poller.metric("resetgate_delivery_events_duplicate_total") > duplicates
            and await poller.metric("resetgate_delivery_events_total", type="deferred") > deferred
        )

    await poll(both_seen, timeout=15, every=0.2)
    view = await live.operation(op)
    assert view["delivery"] == "delivered", "a late deferred never overwrites delivered"


async def test_invariant_7_no_event_closes_the_window_as_unknown(live: E2E) -> None:
    await configure(live.provider_url, delivered_delay_seconds=3600)
    await live.account("e2e-silent")
    op = await live.admit("e2e-silent")
    view = await live.until(op, lambda v: v["observation_closed_at"] is not None, timeout=20)
    assert (view["state"], view["delivery"]) == ("accepted", "unknown")
    assert len(view["attempt_ledger"]) == 1, "silence is never a reason to send again"
    stats = await sandbox_stats(live.provider_url, operation_id=op)
    assert stats["sent_by_operation"][op] == 1

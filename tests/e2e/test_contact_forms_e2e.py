"""Contact forms on real processes: the router converges on the live operation through the
admission logic, adds no send job while it is live, and one event makes one case."""

from __future__ import annotations

from typing import Any

import pytest

from shared.keys import CONTACT_FORMS, CONTACT_FORMS_DEAD, SUPPORT_CASES, PartitionKeys
from tests.e2e.conftest import E2E, poll
from tests.support.sandbox import configure, sandbox_stats

pytestmark = pytest.mark.cluster_pass  # also on a Redis Cluster: make test-cluster


async def submit(live: E2E, event_id: str, **fields: str) -> None:
    values = {
        "event_id": event_id,
        "topic": "password_reset",
        "submitted_at": "2026-01-01T00:00:00Z",
        **fields,
    }
    await live.redis.xadd(CONTACT_FORMS, values)  # type: ignore[arg-type]


async def cases_for(live: E2E, event_id: str) -> list[dict[str, Any]]:
    entries = await live.redis.xrange(SUPPORT_CASES)
    return [fields for _, fields in entries if fields["event_id"] == event_id]


async def case_for(live: E2E, event_id: str) -> dict[str, Any]:
    async def probe() -> list[dict[str, Any]]:
        return await cases_for(live, event_id)

    (case,) = await poll(probe, timeout=15)
    return case


async def jobs_ever_added(live: E2E, op: str) -> int:
    """Every XADD the send stream has had (acked entries are deleted, so XLEN would lie)."""
    info = await live.redis.xinfo_stream(PartitionKeys.of(op).send)
    return int(info["entries-added"])


async def test_form_during_a_live_attempt_attaches_and_adds_no_send_job(live: E2E) -> None:
    await configure(live.provider_url, slow_every=1, slow_seconds=2)
    login = await live.account("e2e-form-live")
    op = await live.admit("e2e-form-live")
    await live.until(op, lambda v: v["state"] == "attempting")
    jobs = await jobs_ever_added(live, op)
    await submit(live, "e2e-evt-live", login=login)
    await submit(live, "e2e-evt-live", login=login)  # the form system retried
    case = await case_for(live, "e2e-evt-live")
    assert (case["operation_id"], case["state"], case["attached"]) == (op, "attempting", "true")
    assert (case["queue"], case["priority"]) == ("account-recovery", "normal")
    assert await jobs_ever_added(live, op) == jobs
    view = await live.until(op, lambda v: v["state"] == "accepted")
    # The retried event was recognised before admission: one convergence, not two.
    assert view["entry_points"] == {"agent": 1, "contact_form": 1}
    assert (await sandbox_stats(live.provider_url, operation_id=op))["sent_by_operation"][op] == 1
    assert len(await cases_for(live, "e2e-evt-live")) == 1


async def test_form_after_acceptance_and_for_an_unknown_login(live: E2E) -> None:
    login = await live.account("e2e-form-done")
    op = await live.admit("e2e-form-done")
    await live.until(op, lambda v: v["delivery"] == "delivered")
    jobs = await jobs_ever_added(live, op)
    await submit(live, "e2e-evt-done", login=login, topic="login_problem")
    await submit(live, "e2e-evt-nobody", login="nobody-here@example.com")
    case = await case_for(live, "e2e-evt-done")
    assert (case["state"], case["attached"], case["priority"]) == ("accepted", "false", "normal")
    assert case["delivery"] == "delivered"
    assert await jobs_ever_added(live, op) == jobs, "cooldown holds: no new operation"
    unknown = await case_for(live, "e2e-evt-nobody")
    assert (unknown["operation_id"], unknown["identity"]) == ("", "unknown")


async def test_malformed_form_is_dead_lettered_and_routing_continues(live: E2E) -> None:
    login = await live.account("e2e-form-after-dead")
    await live.redis.xadd(CONTACT_FORMS, {"topic": "password_reset", "login": login})
    await submit(live, "e2e-evt-after-dead", login=login)
    await case_for(live, "e2e-evt-after-dead")
    dead = [f for _, f in await live.redis.xrange(CONTACT_FORMS_DEAD)]
    assert any(d["reason"] == "missing_event_id" for d in dead)
    assert (
        await live["router"].metric(
            "resetgate_contact_forms_dead_lettered_total", reason="missing_event_id"
        )
        >= 1
    )

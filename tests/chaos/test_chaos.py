"""Invariant 10 under chaos: admissions through every entry point, two senders, a poller and a
router, while services are SIGKILLed every few seconds, Redis crashes once and the provider
answers 5xx, drops connections after accepting and answers too slowly.

After the faults stop and the run settles (bounded): every operation is terminal or held
for review, no email was sent twice for an operation, every ledger is whole, and - with
``appendfsync always`` - nothing the driver saw acknowledged is missing. With ``everysec``
a host crash loses the last second or so of acknowledged admissions: measured and printed
(``chaos report``), not asserted; see docs/reliability.md.

The short runs are part of ``make test``: 800 operations over 12 s, each service SIGKILLed
once and Redis crashed once (the faults drawn 1.0-1.6 s apart so that all six land while the
load runs), the provider's 5xx, drops and slow answers (drops and slow answers at 3 and 4 %
rather than 1 %, as 800 operations make few sends); each of these is asserted to have
happened. The full runs (20,000 operations over 200 s with a fault every 1.5-3.5 s, both
fsync policies, a process crash and an emulated host crash) are ``-m slow`` and keep the
full-size coverage.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.providers.registry import keyless
from tests.chaos import run
from tests.chaos.crashable_redis import Crash, volatile_cache
from tests.chaos.stack import PROVIDER_KIND

# The acknowledged-then-lost figure matters most for a crash that really loses unsynced
# data; without a C compiler the short run falls back to a process crash.
SHORT_CRASH = Crash.HOST if volatile_cache() is not None else Crash.PROCESS
needs_compiler = pytest.mark.skipif(volatile_cache() is None, reason="no C compiler")


def refused_by_the_sender(appendfsync: str) -> None:
    """CHAOS_PROVIDER without an idempotency key under everysec: a host crash can roll an
    accepted attempt back and nothing absorbs the second send, so the sender refuses to
    start on such a Redis (tests/providers/test_keyless_durability.py), and there is no
    run to judge."""
    if appendfsync != "always" and keyless(PROVIDER_KIND):
        pytest.skip(f"{PROVIDER_KIND} has no idempotency key: the sender refuses {appendfsync}")


def check_faults_happened(verdict: run.Verdict) -> None:
    """A run that proves nothing about a fault it never met must fail, not pass."""
    kills = verdict.report["kills"]
    assert all(kills.values()), f"a service was never killed: {kills}"
    assert verdict.report["redis_down_seconds"] > 0, "Redis never crashed"
    injected = verdict.emails["injected"]
    assert all(injected[fault] for fault in ("5xx", "dropped", "slow")), injected


def check(verdict: run.Verdict, appendfsync: str) -> None:
    check_faults_happened(verdict)
    assert not verdict.unexpected_exits, "\n".join(verdict.unexpected_exits)
    assert not verdict.report["not_running_at_end"]
    assert not verdict.unsettled, f"not settled: {list(verdict.unsettled.items())[:20]}"
    assert not verdict.ledger_problems, verdict.ledger_problems[:20]
    assert not verdict.convergence_problems, verdict.convergence_problems[:20]
    emails = verdict.emails
    assert emails["duplicate_sends"] == 0, emails["operations_sent_twice"]
    assert emails["max_emails_per_operation"] <= 1, emails["operations_sent_twice"]
    assert verdict.report["acknowledged"]["gave_up"] == 0
    if appendfsync == "always":
        assert verdict.lost.total == 0, verdict.report["acknowledged_then_lost"]
        assert emails["emails_for_forgotten_operations"] == 0
        # Under everysec a host crash can roll back an attempt's begin with everything it
        # recorded: the resend under the same key is composed anew and its "expires in N
        # minutes" may differ (the provider answers with the email it kept; printed in the
        # report, not asserted). Nothing rolls back under always: every replay is the same.
        assert emails["idempotency_body_mismatches"] == 0


@pytest.mark.timeout(420)
@pytest.mark.parametrize("appendfsync", ["everysec", "always"])
async def test_invariant_10_short_chaos_run(tmp_path: Path, appendfsync: str) -> None:
    refused_by_the_sender(appendfsync)
    plan = run.Plan(
        operations=800,
        duration=12,
        appendfsync=appendfsync,
        crash=SHORT_CRASH,
        seed=run.seed(),
        settle_timeout=150,
        fault_every=(1.0, 1.6),
        # 800 operations met 21 5xx, 6 drops and 3 slow answers at the full runs' rates
        # (3 %, 1 %, 1 %): drops and slow answers raised so that each surely fires.
        provider_faults={"drop_probability": 0.03, "slow_probability": 0.04},
    )
    check(await run.run(tmp_path, plan), appendfsync)


@pytest.mark.slow
@pytest.mark.timeout(2400)
@pytest.mark.parametrize("crash", [Crash.PROCESS, pytest.param(Crash.HOST, marks=needs_compiler)])
@pytest.mark.parametrize("appendfsync", ["everysec", "always"])
async def test_invariant_10_full_chaos_run(tmp_path: Path, appendfsync: str, crash: Crash) -> None:
    refused_by_the_sender(appendfsync)
    plan = run.Plan(
        operations=20_000,
        duration=200,
        appendfsync=appendfsync,
        crash=crash,
        seed=run.seed(),
        settle_timeout=600,
        log_level="WARNING",
    )
    check(await run.run(tmp_path, plan), appendfsync)

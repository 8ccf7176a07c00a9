"""The archive through a storm, every part a real process (benchmarks/archive_storm.py):
PostgreSQL stopped mid-storm and started again, the archiver SIGKILLed while it catches up,
a real Prometheus evaluating the chart's ArchiveLagHigh rule (threshold and ``for`` scaled
to the outage) on the archiver's scraped lag gauge. Every operation reaches the archive once,
as Redis held it; the alert is quiet before the outage, fires during it and clears after.

The fast suite stops PostgreSQL for 20 s with the provider slow enough (5 sends/s) that
operations keep settling through the outage; the slow suite for 60 s in a 2,000 storm."""

from __future__ import annotations

import pytest

from benchmarks.archive_storm import Outcome, Plan, storm

# A restarted archiver takes over its dead self's batch after this (default 30 s).
ARCHIVER_ENV = {"RESETGATE_ARCHIVE_CLAIM_IDLE_SECONDS": "1"}


def assert_whole_and_alerted(outcome: Outcome) -> None:
    plan = outcome.plan
    assert not outcome.notes[1:], outcome.notes  # the first names the log folder
    assert outcome.mismatched == [] and outcome.not_compared == 0
    assert outcome.operations == outcome.distinct == plan.n  # each once
    assert outcome.attempt_rows == outcome.ledger_rows >= plan.n
    assert outcome.event_rows >= plan.n  # the sandbox reports a delivery for every email
    assert outcome.killed_holding > 0  # killed mid-batch: entries read, not acknowledged
    # The harm prevented (a lag nobody hears of) and the opposite (an alert on a healthy one).
    assert outcome.alert_before is False
    assert outcome.alert_fired_s is not None, outcome
    assert outcome.alert_cleared_s is not None, outcome
    assert outcome.whole


def outage(n: int, rate: float, seconds: float, timeout: float, replicas: int = 2) -> Plan:
    """A storm of ``n`` at ``rate`` sends/s, PostgreSQL stopped ``seconds`` in its middle,
    the archiver killed mid-batch, Prometheus watching; every operation kept in Redis.
    ``replicas`` admissions and senders: what the archive sees does not depend on how many
    (one of each is two process start-ups less)."""
    return Plan(
        admissions=replicas,
        senders=replicas,
        n=n,
        rate=rate,
        tail_s=3600,
        outage_s=seconds,
        kill=True,
        prometheus=True,
        memory=False,
        archiver_env=ARCHIVER_ENV,
        timeout=timeout,
    )


@pytest.mark.timeout(420)  # about 200 s beside a CPU hog (make test-repeat LOAD=1)
async def test_postgres_stopped_and_an_archiver_killed_mid_storm_lose_nothing_and_alert() -> None:
    assert_whole_and_alerted(await storm(outage(60, rate=5, seconds=20, timeout=120, replicas=1)))


@pytest.mark.slow
@pytest.mark.timeout(1200)
async def test_a_60_s_postgres_outage_in_a_2000_storm_loses_nothing_and_alerts() -> None:
    assert_whole_and_alerted(await storm(outage(2000, rate=20, seconds=60, timeout=600)))

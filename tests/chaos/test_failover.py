"""Losing the Redis primary mid-storm (Sentinel, Cluster), with WAIT on and off.

With ``RESETGATE_WAIT_REPLICAS=1`` a failover loses no acknowledged operation and sends no
email twice, even through a provider without an idempotency key: admission acknowledges only
what a replica holds, and the sender calls the provider only for an attempt a replica holds.
With it off the figures are measured and printed (``failover report``), not judged; see
docs/reliability.md. The short Sentinel run is part of ``make test``; the 2,000-operation
storms on both topologies are ``-m slow``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos import failover


def check(outcome: failover.Outcome, wait_replicas: int) -> None:
    report = outcome.report
    assert not outcome.exited, report
    assert report["gave_up"] == 0, report
    assert not outcome.unsettled, list(outcome.unsettled.items())[:20]
    assert not outcome.ledger_problems, outcome.ledger_problems[:20]
    if wait_replicas:
        assert outcome.lost.total == 0, report
        assert report["duplicate_sends"] == 0, outcome.emails["operations_sent_twice"]
        assert report["max_emails_per_operation"] <= 1, outcome.emails["operations_sent_twice"]
        assert report["operations_emailed_twice"] == 0, outcome.emails["operations_sent_twice"]
        assert report["emails_for_forgotten_operations"] == 0, report
        assert report["accounts_emailed_twice"] == 0, report


@pytest.mark.timeout(400)
async def test_sentinel_failover_mid_storm_loses_nothing_and_sends_nothing_twice_short(
    tmp_path: Path,
) -> None:
    storm = failover.Storm(
        "sentinel", operations=300, duration=8, wait_replicas=1, settle_timeout=90
    )
    check(await failover.run(storm, tmp_path), storm.wait_replicas)


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("wait_replicas", [1, 0])
@pytest.mark.parametrize("topology", ["sentinel", "cluster"])
async def test_failover_mid_storm(tmp_path: Path, topology: str, wait_replicas: int) -> None:
    storm = failover.Storm(topology, operations=2000, duration=30, wait_replicas=wait_replicas)
    check(await failover.run(storm, tmp_path), wait_replicas)

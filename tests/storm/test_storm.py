"""The storm benchmark runs end to end (real admission, senders, poller, sandbox) and its
outcome holds at small N: nothing sent twice, nothing lost, memory per operation in bounds.

Timing is not asserted here (a loaded machine would make it flaky); the figures are the
benchmark's, at full size, in the README.
"""

from __future__ import annotations

import pytest

from benchmarks.storm import storm
from benchmarks.storm_report import SCENARIOS, Run

MEMORY_TARGET = 1.2 * 1024  # bytes per accepted operation with a one-attempt ledger


async def run(name: str, n: int, rate: float) -> Run:
    return await storm(Run(SCENARIOS[name], n, rate, senders=2), timeout=240)


def assert_whole(result: Run) -> None:
    assert result.drain_s == result.drain_s, result.notes  # drained (not NaN) in time
    assert result.store.states == {"accepted": result.n}, result.store.states
    assert (result.store.duplicates, result.sandbox_duplicates) == (0, 0)
    assert (result.store.lost, result.sandbox_lost) == (0, 0)
    assert result.emails == result.n
    assert result.cpu_s > 0


@pytest.mark.timeout(300)
async def test_a_small_storm_is_drained_whole_and_fits_the_memory_target() -> None:
    result = await run("ceiling-1.0", n=120, rate=100)
    assert_whole(result)
    memory = result.accepted_memory
    assert memory.operations >= 100  # nearly all accepted at their first attempt
    assert 0 < memory.total <= MEMORY_TARGET, memory
    assert memory.encodings.keys() == {"listpack"}


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", ["ceiling-1.5", "restart", "drop"])
async def test_every_scenario_ends_whole_at_small_n(name: str) -> None:
    assert_whole(await run(name, n=300, rate=100))

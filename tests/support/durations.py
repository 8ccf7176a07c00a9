"""The longest work first: what each test took in a recorded run orders the parallel pass.

pytest-xdist (``--dist loadgroup``) hands a worker the next unit of work in collection order:
a group (tests sharing a package- or module-wide stack, see tests/conftest.py) or one test.
Collected file by file, a long unit met late (a schemathesis run, a stack of processes) is
still running when every other worker is done, and the whole pass waits for it. Ordered by
recorded cost, longest first, the short units fill in around the long ones instead.

``tests/durations.json`` holds the seconds (setup, call and teardown) of every test that took
at least ``KEPT_S`` in the run that wrote it: `make test-durations` writes it anew. A test
not in it (new, or quick) counts as 0 and keeps its place among those after the known ones;
a stale file only costs time, never a test.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

FILE = Path(__file__).resolve().parents[1] / "durations.json"
KEPT_S = 1.0
OPTION = "--record-durations"


def order(items: list[pytest.Item], unit_of: dict[str, str], known: dict[str, float]) -> None:
    """Sort ``items`` in place: the units (``unit_of``: node id -> its group, else absent)
    of the highest cost in ``known`` (node id -> seconds) first, each unit's tests in their
    collected order; units of equal cost keep their collected order."""
    if not known:
        return
    cost: dict[str, float] = defaultdict(float)
    for item in items:
        cost[unit_of.get(item.nodeid, item.nodeid)] += known.get(item.nodeid, 0.0)
    first = {}
    for index, item in enumerate(items):
        first.setdefault(unit_of.get(item.nodeid, item.nodeid), index)
    position = {item.nodeid: index for index, item in enumerate(items)}

    def key(item: pytest.Item) -> tuple[float, int, int]:
        unit = unit_of.get(item.nodeid, item.nodeid)
        return -cost[unit], first[unit], position[item.nodeid]

    items.sort(key=key)


def load() -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(FILE.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def test_id(nodeid: str) -> str:
    """The node id without the ``@group`` xdist appends under ``--dist loadgroup``."""
    base, at, group = nodeid.rpartition("@")
    return base if at and "]" not in group else nodeid


class Recorder:
    """``--record-durations``: the seconds of each test of this run, written at its end."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[test_id(report.nodeid)] += report.duration

    @pytest.hookimpl
    def pytest_sessionfinish(self) -> None:
        kept = {k: round(v, 1) for k, v in sorted(self.seconds.items()) if v >= KEPT_S}
        FILE.write_text(json.dumps(kept, indent=0, sort_keys=True) + "\n")

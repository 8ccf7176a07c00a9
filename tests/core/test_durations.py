"""The parallel pass starts the longest work first (tests/support/durations.py); the CPU
recorder ranks files (tests/support/cpu.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tests.support import cpu, durations


def items(*nodeids: str) -> list[Any]:
    return [SimpleNamespace(nodeid=n) for n in nodeids]


def test_the_costliest_unit_goes_first_and_a_group_stays_whole_in_its_order() -> None:
    collected = items("a.py::quick", "b.py::one", "b.py::two", "c.py::long", "d.py::new")
    groups = {"b.py::one": "b.py", "b.py::two": "b.py"}
    known = {"a.py::quick": 1.0, "b.py::one": 3.0, "b.py::two": 3.0, "c.py::long": 5.0}
    durations.order(collected, groups, known)
    # b.py (6 s in all) before c.py (5 s): a group's cost is its tests' sum.
    assert [i.nodeid for i in collected] == [
        "b.py::one",
        "b.py::two",
        "c.py::long",
        "a.py::quick",
        "d.py::new",
    ]


def test_without_recorded_durations_the_collected_order_stays() -> None:
    collected = items("b.py::x", "a.py::y")
    durations.order(collected, {}, {})
    assert [i.nodeid for i in collected] == ["b.py::x", "a.py::y"]


def test_a_recorded_id_drops_the_group_xdist_appends_but_not_a_parameter() -> None:
    assert durations.test_id("t.py::x@/repo/tests/e2e") == "t.py::x"
    assert durations.test_id("t.py::x[a@b.example]") == "t.py::x[a@b.example]"
    assert durations.test_id("t.py::x[a@b]@t.py") == "t.py::x[a@b]"


def test_a_missing_or_broken_file_orders_nothing(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(durations, "FILE", tmp_path / "durations.json")
    assert durations.load() == {}
    durations.FILE.write_text("[1, 2]")
    assert durations.load() == {}


def test_the_cpu_ranking_sums_files_and_puts_the_session_teardown_apart() -> None:
    phases = {
        "a.py::x": [1.0, 2.0, 0.0],
        "a.py::y": [0.0, 1.0, 0.5],
        "b.py::z": [4.0, 1.0, 9.0],  # a worker's last test: its teardown ends the session
    }
    lines = cpu.ranking(phases, {"gw0": 20.0}, {"b.py::z"})
    assert lines[1].split() == ["5.0", "1", "b.py", "(most:", "5.0", "z)"]
    assert lines[2].split() == ["4.5", "2", "a.py", "(most:", "3.0", "x)"]
    assert lines[3].split()[0] == "9.0"  # session teardown
    assert lines[4].split()[0] == "1.5"  # 20 in the workers, 18.5 in tests

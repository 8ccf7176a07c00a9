"""The parallel pass starts the longest work first (tests/support/durations.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tests.support import durations


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

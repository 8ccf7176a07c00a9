"""``--record-cpu=FILE``: the CPU seconds each test costs, its processes included.

The suite's limit on a 2-core machine is CPU, not waiting, and wall time under load says
little about it. Each process that runs tests (an xdist worker, or pytest itself) reads
``getrusage`` for itself (every thread) and for its reaped children around each test's
setup, call and teardown, and puts the three deltas on the test's reports; the process that
writes the terminal (the xdist controller, or pytest itself) sums them per test, writes
``FILE`` (JSON: each test's ``[setup, call, teardown]`` CPU-s, and each worker's total) and
prints the costliest files.

What the count holds and what escapes it:
- a child counts once reaped (``RUSAGE_CHILDREN``), with the children it reaped itself: a
  service a test starts and stops counts; one started by a module's fixture counts in the
  teardown of the module's last test; a session's redis-server in the teardown of its
  worker's last test (printed apart, as "session teardown");
- a process nobody in the worker's tree waits for (one that daemonizes, re-parented to
  init) escapes;
- a worker's start-up and collection, and its time between tests, are in its total and in
  no test: the summary prints that remainder.
"""

from __future__ import annotations

import json
import resource
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

OPTION = "--record-cpu"
KEY = "cpu_s"
SHOWN_FILES = 25


def cpu_now() -> float:
    """CPU-s (user + system) of this process and of its reaped children so far."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class Meter:
    """In each process that runs tests: the CPU-s since the last phase, on each report."""

    def __init__(self) -> None:
        self.mark = cpu_now()

    @pytest.hookimpl
    def pytest_runtest_logstart(self) -> None:
        self.mark = cpu_now()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self) -> Any:
        outcome = yield
        now = cpu_now()
        outcome.get_result().user_properties.append((KEY, round(now - self.mark, 3)))
        self.mark = now

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is not None:
            workeroutput[KEY] = cpu_now()


class Recorder:
    """Where the terminal is written: the per-test sums, then ``FILE`` and the ranking."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.phases: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
        self.last_of_worker: dict[str, str] = {}
        self.workers: dict[str, float] = {}

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        seconds = sum(v for k, v in report.user_properties if k == KEY)
        phase = ("setup", "call", "teardown").index(report.when or "call")
        self.phases[report.nodeid][phase] += seconds
        node = getattr(report, "node", None)  # the xdist worker that ran it
        self.last_of_worker[node.gateway.id if node else "main"] = report.nodeid

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self) -> None:
        if not self.workers:  # no xdist: this process ran the tests
            self.workers["main"] = cpu_now()
        record = {
            "tests": {k: [round(s, 2) for s in v] for k, v in sorted(self.phases.items())},
            "workers": {k: round(v, 1) for k, v in sorted(self.workers.items())},
            "last_of_worker": self.last_of_worker,
        }
        self.path.write_text(json.dumps(record, indent=0) + "\n")

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        write = terminalreporter.write_line
        for line in ranking(self.phases, self.workers, set(self.last_of_worker.values())):
            write(line)
        write(f"CPU per test written to {self.path}")


class XdistRecorder(Recorder):
    """The xdist controller's recorder: each worker's total comes with its end."""

    @pytest.hookimpl
    def pytest_testnodedown(self, node: Any) -> None:
        self.workers[node.gateway.id] = float(node.workeroutput.get(KEY, 0.0))


def ranking(
    phases: dict[str, list[float]], workers: dict[str, float], lasts: set[str]
) -> list[str]:
    """The summary: the costliest files (CPU-s, tests, the costliest test), then totals."""
    by_file: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    top: dict[str, tuple[float, str]] = {}
    session_teardown = 0.0
    for nodeid, (setup, call, teardown) in phases.items():
        if nodeid in lasts:  # the session's fixtures end in its teardown
            session_teardown += teardown
            teardown = 0.0
        path = nodeid.split("::")[0]
        cost = setup + call + teardown
        by_file[path] += cost
        count[path] += 1
        top[path] = max(top.get(path, (0.0, "")), (cost, nodeid.split("::", 1)[-1]))
    tests_total = sum(by_file.values()) + session_teardown
    lines = [f"==> CPU-s by file (of {tests_total:.0f} in tests)"]
    for path, cost in sorted(by_file.items(), key=lambda kv: -kv[1])[:SHOWN_FILES]:
        most, name = top[path]
        lines.append(f"{cost:8.1f}  {count[path]:4d}  {path}  (most: {most:.1f} {name})")
    total = sum(workers.values())
    lines.append(f"{session_teardown:8.1f}  session teardown (the workers' last tests)")
    lines.append(f"{total - tests_total:8.1f}  in no test (start-up, collection, between tests)")
    lines.append(f"{total:8.1f}  the workers' total, their reaped children included")
    return lines


def configure(config: pytest.Config) -> None:
    """Registers the meter where tests run and the recorder where the terminal is written."""
    path = config.getoption(OPTION)
    if not path:
        return
    config.pluginmanager.register(Meter(), "cpu-meter")
    if not hasattr(config, "workerinput"):
        xdist = config.pluginmanager.has_plugin("xdist")
        recorder = (XdistRecorder if xdist else Recorder)(Path(path))
        config.pluginmanager.register(recorder, "cpu-recorder")

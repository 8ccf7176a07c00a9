"""``storm.py --profile DIR``: py-spy samples of every sender during the storm, and where
their CPU went.

Each sender gets ``py-spy record --format raw --nolineno`` from the storm's first moment to
the end of the drain (stopped with SIGINT, which makes py-spy write its file). Without
pausing the sender py-spy cannot tell a thread asleep in the event loop's wait from one
running, so every sample counts: the shares are wall-clock time, not CPU (a storm sampled
141 s where its senders spent 13 CPU-s; docs/performance.md). The summary adds the
senders' samples up per function: "self" is where the sampled frame was, "total" counts a
function once per sample anywhere in its stack. Profiling is the benchmark's: nothing of it
ships in a service. py-spy is not a dependency: ``.venv/bin/pip install py-spy``.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

RATE = 100  # samples a second
TOP = 25  # functions printed per table
STOP_SECONDS = 30.0


def py_spy() -> str | None:
    found = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    return found if Path(found).exists() else None


class Profiler:
    """py-spy on each of ``pids``; ``stop()`` ends them and returns the summary's lines."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.spies: list[subprocess.Popen[bytes]] = []
        self.files: list[Path] = []

    def start(self, pids: list[int]) -> None:
        spy = py_spy()
        if spy is None:
            raise SystemExit("--profile needs py-spy: .venv/bin/pip install py-spy")
        self.out.mkdir(parents=True, exist_ok=True)
        for pid in pids:
            path = self.out / f"sender-{pid}.txt"
            argv = [
                spy,
                "record",
                "-p",
                str(pid),
                "-r",
                str(RATE),
                "--format",
                "raw",
                "--nolineno",
                "--nonblocking",
                "-o",
                str(path),
            ]
            self.spies.append(
                subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            )
            self.files.append(path)

    def stop(self) -> list[str]:
        for spy in self.spies:
            spy.send_signal(signal.SIGINT)
        for spy in self.spies:
            try:
                spy.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                spy.kill()
        return summary([f for f in self.files if f.exists()])


def function(frame: str) -> str:
    """``name (path/to/module.py)`` as ``module.py:name``: one row per function."""
    name, _, where = frame.partition(" (")
    return f"{Path(where.rstrip(')')).name}:{name}"


def summary(files: list[Path]) -> list[str]:
    own: Counter[str] = Counter()
    anywhere: Counter[str] = Counter()
    samples = 0
    for path in files:
        for line in path.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if not stack or not count.isdigit():
                continue
            frames = [function(f) for f in stack.split(";")]
            samples += int(count)
            own[frames[-1]] += int(count)
            for name in set(frames):
                anywhere[name] += int(count)
    if not samples:
        return ["profile: no samples (py-spy could not attach?)"]
    lines = [
        f"profile: {samples} samples at {RATE}/s over {len(files)} senders "
        f"({samples / RATE:.1f} CPU-s sampled); raw stacks in {files[0].parent}"
    ]
    for title, counts in (("self", own), ("total", anywhere)):
        lines.append(f"  top {TOP} by {title} (% of samples):")
        lines += [f"    {100 * n / samples:5.1f} %  {name}" for name, n in counts.most_common(TOP)]
    return lines

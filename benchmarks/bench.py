"""``make bench``: the benchmarks the documentation quotes, run in turn, and the tables of
docs/performance.md and the README written from what they printed.

    .venv/bin/python benchmarks/bench.py                 # every benchmark (about an hour)
    .venv/bin/python benchmarks/bench.py --only storm-ceiling-1.5 --only admission
    .venv/bin/python benchmarks/bench.py --tables        # rewrite the tables, run nothing
    make bench ONLY="storm-ceiling-1.5 admission"

Each benchmark ends with its headline figures on one ``figures:`` line (benchmarks/figures.py).
The runner keeps the last result of each in benchmarks/results.json, with when it ran, the
machine's load average as it started and the commit, and rewrites the tables between the
``make bench`` markers of both pages from that file (and the storm's scenario table from
its definitions): a figure in them is what a command printed, never typed in. ``--only``
runs some and keeps the others' last results.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import figures

RESULTS = ROOT / "benchmarks" / "results.json"
PERFORMANCE, README = ROOT / "docs" / "performance.md", ROOT / "README.md"
END = "<!-- make bench: end -->"


@dataclass(frozen=True)
class Bench:
    name: str
    what: str
    command: str  # as a reader types it from the project's root
    readme: bool = False  # also in the README's table


STORM = ".venv/bin/python benchmarks/storm.py --scenario"
# A table, one benchmark a row: aligned by hand, so the formatter leaves it.
BENCHES = (
    Bench("storm-ceiling-1.5", "storm, pacing ceiling 1.5 x the provider's rate",
          f"{STORM} ceiling-1.5", readme=True),
    Bench("storm-ceiling-1.0", "storm, ceiling at the provider's rate",
          f"{STORM} ceiling-1.0"),
    Bench("storm-traces", "storm ceiling-1.0 with traces unset, then on at sampling 1.0",
          f"{STORM} ceiling-1.0 --traces"),
    Bench("storm-restart", "storm, each sender restarted mid-run",
          f"{STORM} restart", readme=True),
    Bench("storm-slow-1", "a new SES account's quota: 1 send/s, burst 1",
          f"{STORM} slow-1 -n 120"),
    Bench("storm-slow-0.2", "0.2 sends/s, burst 1", f"{STORM} slow-0.2 -n 30"),
    Bench("storm-incident-90", "429s stating no wait for 90 s, then 20 sends/s",
          f"{STORM} incident -n 400 --outage 90", readme=True),
    Bench("storm-incident-600", "429s stating no wait for 600 s, then 20 sends/s",
          f"{STORM} incident -n 400 --outage 600"),
    Bench("storm-quota-ses", "SES on moto, daily quota 200 < N = 250",
          f"{STORM} quota --provider ses -n 250"),
    Bench("storm-drop-postmark", "2 % of answers dropped, keyless Postmark, search 30 s late",
          f"{STORM} drop --provider postmark --search-delay 30 -n 1000"),
    Bench("admission", "admission `POST /v1/password-resets`, one process",
          ".venv/bin/python benchmarks/admission.py", readme=True),
    Bench("promoter", "due promoter as the due set grows",
          ".venv/bin/python benchmarks/promoter.py"),
    Bench("observation", "delivery events pulled from the provider's feed, N = 50,000",
          ".venv/bin/python benchmarks/observation.py"),
    Bench("archive-history", "account history from the archive, 1,000,000 operations",
          ".venv/bin/python benchmarks/archive_history.py", readme=True),
    Bench("archive-storm", "storm with the archiver on, N = 10,000, 300 s tail",
          ".venv/bin/python benchmarks/archive_storm.py --tail 300"),
    Bench("archive-outage", "PostgreSQL stopped 60 s mid-storm, the archiver SIGKILLed",
          ".venv/bin/python benchmarks/archive_storm.py --pg-outage 60 --kill-archiver "
          "--prometheus --no-memory"),
    Bench("archive-memory", "Redis per settled operation, archive off and on",
          ".venv/bin/python benchmarks/archive_memory.py --operations 3000"),
)  # fmt: skip


def run(bench: Bench) -> dict[str, object]:
    """Run one benchmark as a reader would, its output passed through; its result."""
    load = os.getloadavg()[0]
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    print(f"\n==> {bench.name}: {bench.command}", flush=True)
    process = subprocess.Popen(
        bench.command.split(), cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    output = []
    for line in process.stdout:
        print(line, end="", flush=True)
        output.append(line)
    shown = figures.last("".join(output)) if process.wait() == 0 else None
    if shown is None:
        shown = {"failed": f"exit {process.returncode}, no figures printed"}
    commit = subprocess.run(
        ["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    return {"figures": shown, "ran": started, "load": round(load, 1), "commit": commit}


def table(results: dict[str, dict[str, object]], readme: bool) -> str:
    """The figures table; the README's has its benchmarks only, and leaves when each ran (and
    at what load) to docs/performance.md."""
    rows = ["| what | figures | command |" + ("" if readme else " ran (load average, commit) |")]
    rows.append("|---|---|---|" + ("" if readme else "---|"))
    for bench in BENCHES:
        if readme and not bench.readme:
            continue
        result = results.get(bench.name)
        if result is None:
            shown, ran = "not yet run by `make bench`", ""
        else:
            pairs = result["figures"]
            assert isinstance(pairs, dict)
            shown = "; ".join(  # the README's: the first two, the headline's first
                f"{label}: {value}" for label, value in list(pairs.items())[: 2 if readme else None]
            )
            ran = f"{result['ran']} ({result['load']}, {result['commit']})"
        if readme and result is not None:
            shown += f" (load {result['load']})"
        row = f"| {bench.what} | {shown} | `{bench.command}` |"
        rows.append(row if readme else f"{row} {ran} |")
    return "\n".join(rows)


def scenarios() -> str:
    """The storm's scenarios as benchmarks/storm_report.py defines them."""
    from benchmarks.storm_report import SCENARIOS

    rows = ["| scenario | what differs from the defaults |", "|---|---|"]
    rows += [f"| `{s.name}` | {s.what} |" for s in SCENARIOS.values()]
    return "\n".join(rows)


def write_tables(results: dict[str, dict[str, object]]) -> None:
    """Each ``<!-- make bench: NAME -->`` ... ``<!-- make bench: end -->`` block rewritten."""
    blocks = {
        (PERFORMANCE, "figures"): table(results, readme=False),
        (PERFORMANCE, "scenarios"): scenarios(),
        (README, "figures"): table(results, readme=True),
    }
    for (path, name), rendered in blocks.items():
        text = path.read_text()
        begin = f"<!-- make bench: {name} -->"
        between = re.compile(re.escape(begin) + ".*?" + re.escape(END), re.DOTALL)
        if not between.search(text):
            raise SystemExit(f"{path}: no {begin} ... {END} markers")
        block = f"{begin}\n{rendered}\n{END}"
        path.write_text(between.sub(block.replace("\\", "\\\\"), text))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    names = [bench.name for bench in BENCHES]
    parser.add_argument("--only", action="append", choices=names, default=[], metavar="NAME")
    parser.add_argument("--tables", action="store_true", help="rewrite the tables only")
    parser.add_argument("--list", action="store_true", help="the benchmarks' names")
    args = parser.parse_args()
    if args.list:
        print("\n".join(f"{b.name:<22} {b.command}" for b in BENCHES))
        return
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    if not args.tables:
        for bench in BENCHES:
            if args.only and bench.name not in args.only:
                continue
            results[bench.name] = run(bench)
            RESULTS.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    write_tables(results)


if __name__ == "__main__":
    main()

"""The line a benchmark ends with, for ``make bench`` (benchmarks/bench.py) to read.

A benchmark prints what it measured for people first, then its headline figures once more as
``figures: {json}`` (a label a reader understands -> the figure as the table shows it). The
runner keeps the last such line of each run, so the page's table is what was printed, never
retyped.
"""

from __future__ import annotations

import json

PREFIX = "figures: "


def emit(figures: dict[str, str]) -> None:
    """Print the headline figures, label -> figure, in the order the table shows them."""
    print(PREFIX + json.dumps(figures, ensure_ascii=False), flush=True)


def last(output: str) -> dict[str, str] | None:
    """The figures of the last ``figures:`` line in ``output``, if there is one."""
    for line in reversed(output.splitlines()):
        if line.startswith(PREFIX):
            figures: dict[str, str] = json.loads(line.removeprefix(PREFIX))
            return figures
    return None

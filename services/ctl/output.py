"""How every ``resetgate ops`` view prints: a table for people, ``--json`` for scripts."""

from __future__ import annotations

import argparse
from typing import Any

from shared import codec


def print_view(args: argparse.Namespace, value: Any, lines: list[str]) -> None:
    if getattr(args, "json", False):
        print(codec.dumps_str(value))
    else:
        print("\n".join(lines))

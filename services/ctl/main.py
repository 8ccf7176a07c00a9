"""``resetgate``: one command for local runs, the account directory and on-call tools.

Each command group lives in its own module with ``register(subparsers)``; a handler
returns the process exit code.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import import_module

GROUPS = ("up", "accounts", "ops")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="resetgate", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for group in GROUPS:
        import_module(f"services.ctl.{group}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())

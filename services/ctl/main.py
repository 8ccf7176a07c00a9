"""``resetgate``: one command for local runs, the account directory and on-call tools.

Each command group lives in its own module with ``register(subparsers)``; a handler
returns the process exit code.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from importlib import import_module

GROUPS = ("up", "accounts", "ops", "templates", "preflight", "archive")

DESCRIPTION = """\
resetgate: one recovery operation, one token, one email per password-reset request.

  resetgate up                      run the whole stack on this machine (what `make run` does)
  resetgate accounts add|import     fill the local account directory
  resetgate ops status|oldest|show  see where operations stand; pause, drain, quarantine
  resetgate templates check|preview check the reset email's templates; see what a player gets
  resetgate providers check         ask each provider what a first send would hit (read-only)
  resetgate archive migrate         bring the PostgreSQL evidence archive's schema up to date

Commands that read or write state print the Redis they talk to first: RESETGATE_REDIS_URL
when set, else the stack `resetgate up` started (its .run/env file).
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="resetgate",
        description=DESCRIPTION,
        epilog="`resetgate COMMAND --help` shows each command's options.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in GROUPS:
        import_module(f"services.ctl.{group}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # `resetgate ops status | head`: the reader has what it wanted. Point stdout at
        # /dev/null so the interpreter's final flush does not raise a second time.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())

"""A group of ``resetgate ops`` commands: each subcommand runs one handler against Redis."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeAlias

from shared.redis import RedisClient

# A command's work: the Redis client, the settings it was run with, its arguments -> exit code.
Handler = Callable[[RedisClient, Any, argparse.Namespace], Awaitable[int]]
# How a handler is run: settings loaded, Redis opened (services.ctl.ops).
Run = Callable[[Handler], Callable[[argparse.Namespace], int]]
Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


class Add(Protocol):
    def __call__(
        self, name: str, handler: Handler, help_text: str, *, json: bool = ...
    ) -> argparse.ArgumentParser: ...


def adder(cmds: Subcommands, run: Run, *, json: bool = False) -> Add:
    """``add(name, handler, help_text)``: a subcommand of ``cmds`` that runs ``handler``, with
    ``--json`` where ``json`` (the group's default unless the call says)."""

    def add(
        name: str, handler: Handler, help_text: str, *, json: bool = json
    ) -> argparse.ArgumentParser:
        parser = cmds.add_parser(name, help=help_text)
        if json:
            parser.add_argument("--json", action="store_true", help="machine-readable output")
        parser.set_defaults(handler=run(handler))
        return parser

    return add


def group(cmds: Subcommands, name: str, help_text: str, run: Run) -> Add:
    """A command with subcommands of its own (``resetgate ops <name> <subcommand>``)."""
    parser = cmds.add_parser(name, help=help_text)
    return adder(parser.add_subparsers(dest=f"{name}_command", required=True), run)

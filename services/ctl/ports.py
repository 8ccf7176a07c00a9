"""Where `resetgate up` listens: every port at a fixed offset from admission's, one table.

Fixed offsets keep a second shell's sourced ``.run/env`` right across restarts (the embedded
Redis took a random port before); ``RESETGATE_HTTP_PORT`` (or ``--port``) moves them all.
"""

from __future__ import annotations

import argparse
import os

from services.ctl import localstack
from services.ctl.embedded import bindable

DEFAULT_PORT = 8080
# The one table; plan_ports, the help and the busy-port line derive from it.
PORT_OFFSETS = {
    "admission": 0,  # the public and internal API
    "admission ops": 1,  # each service's operational listener (/healthz /readyz /metrics)
    "sender ops": 2,
    "poller ops": 3,
    "router ops": 4,
    "webhooks": 5,  # the poller's webhook listener, when the provider pushes events
    "console": 6,  # the support console
    "redis": 7,  # the embedded Redis (none when RESETGATE_REDIS_URL is set)
    "postgres": 8,  # the evidence archive's local PostgreSQL, when one is installed
    "prometheus": 9,  # `up --prometheus`
    "sandbox": 10,  # the sandbox provider (+ 11 ... one per name with --providers)
    "archiver ops": 15,  # the archiver's operational listener, beside that PostgreSQL
}
SANDBOX_OFFSET = PORT_OFFSETS["sandbox"]
CONSOLE_OFFSET = PORT_OFFSETS["console"]
REDIS_OFFSET = PORT_OFFSETS["redis"]
MAX_PROVIDERS = 5
# Planned only when the archive runs (services.ctl.localpg adds them): kept free otherwise.
ARCHIVE = ("postgres", "archiver ops")
OPS = " ops"  # a service's operational listener (/healthz /readyz /metrics) in the port plan


def requested_port(args: argparse.Namespace) -> int:
    """``--port``, else ``RESETGATE_HTTP_PORT`` (so `RESETGATE_HTTP_PORT=18080 make run`
    works), else 8080."""
    if args.port is not None:
        return int(args.port)
    raw = os.environ.get("RESETGATE_HTTP_PORT", "").strip()
    if not raw:
        return DEFAULT_PORT
    if not raw.isdigit() or not 1 <= int(raw) <= 65535 - max(PORT_OFFSETS.values()):
        raise SystemExit(f"invalid configuration: RESETGATE_HTTP_PORT: {raw!r} is not a port")
    return int(raw)


def plan_ports(
    first: int,
    kind: str = "http",
    names: list[str] | None = None,
    embedded: bool = True,
    prometheus: bool = False,
) -> dict[str, int]:
    """Every port of the stack at its offset in PORT_OFFSETS from ``first`` (admission's API):
    the webhook listener only when the provider pushes events, Redis only when embedded, one
    sandbox per name from the sandbox's offset."""
    wanted = {
        "webhooks": localstack.pushes_events(kind),
        "redis": embedded,
        "prometheus": prometheus,
    }
    plan = {
        name: first + offset
        for name, offset in PORT_OFFSETS.items()
        if wanted.get(name, True) and name not in ARCHIVE and name != "sandbox"
    }
    sandboxes = (
        {"sandbox": first + SANDBOX_OFFSET}
        if not names
        else {f"sandbox {name}": first + SANDBOX_OFFSET + i for i, name in enumerate(names)}
    )
    return {**sandboxes, **plan}


def port_layout() -> str:
    """The offsets table in words, for --help and the busy-port line."""
    others = ", ".join(f"{name} + {offset}" for name, offset in PORT_OFFSETS.items() if offset)
    return f"that port (admission), {others} (+ {SANDBOX_OFFSET + 1} ... with --providers)"


def check_ports(ports: dict[str, int]) -> None:
    for name, port in ports.items():
        if not bindable(port):
            raise SystemExit(
                f"port {port} ({name}) is already in use on 127.0.0.1: stop what holds it, or "
                "choose other ports: RESETGATE_HTTP_PORT=18080 make run (or resetgate up "
                f"--port 18080); the stack takes {port_layout()}"
            )

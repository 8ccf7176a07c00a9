"""Which Lua scripts the Cluster pass (`make test-cluster`) ran, so that none is left out.

The Cluster pass runs only the tests marked ``cluster_pass`` (those whose subject is keys,
scripts or a partition's work crossing slots), not every test of tests/e2e and tests/sender
twice. Each script must still run on a Cluster at least once: a script is in a node's
script cache (``SCRIPT EXISTS``; FLUSHALL keeps the cache) once anything ran it there, the
services' processes included. Each worker reports the scripts its Clusters held at the end
of its session: the session's, and every one it stopped before (tests/e2e runs its services
on a Cluster of its own, stopped at the package's end, whose scripts went unreported before);
where the terminal is written, the union is compared with every script.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import pytest
import redis

import shared.scripts
from shared.scripts import Script

KEY = "cluster_scripts"


def every_script() -> dict[str, str]:
    """Each script's name and the SHA1 it is sent under, as the services render it."""
    found: dict[str, str] = {}
    for module in pkgutil.iter_modules(shared.scripts.__path__):
        imported = importlib.import_module(f"shared.scripts.{module.name}")
        for value in vars(imported).values():
            script = getattr(value, "SCRIPT", None)
            if isinstance(script, Script):
                found[script.name] = script.sent.sha
    return found


def ran_on(ports: list[int]) -> set[str]:
    """The scripts any of these nodes has in its cache."""
    scripts = every_script()
    ran: set[str] = set()
    for port in ports:
        with redis.Redis(port=port, socket_timeout=5) as client:
            exists = client.script_exists(*scripts.values())
        ran |= {name for name, held in zip(scripts, exists, strict=True) if held}
    return ran


# The scripts of the Clusters this process stopped (RedisClusterServers.stop keeps them).
_stopped: set[str] = set()


def keep(ports: list[int]) -> None:
    """Before a Cluster stops: what its nodes ran, for :func:`ran_here`. A node that does not
    answer (a test killed or paused it) holds nothing that counts."""
    for port in ports:
        try:
            _stopped.update(ran_on([port]))
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
            continue


def ran_here(ports: list[int]) -> set[str]:
    """The scripts these nodes hold, and those of every Cluster this process stopped."""
    return ran_on(ports) | _stopped


class Report:
    """Where the terminal is written: the scripts no worker's Cluster ran."""

    def __init__(self) -> None:
        self.ran: set[str] = set()
        self.reported = False

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any) -> None:
        if KEY in node.workeroutput:
            self.reported = True
            self.ran |= set(node.workeroutput[KEY])

    def add(self, ran: set[str]) -> None:
        self.reported = True
        self.ran |= ran

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.reported:
            return
        missing = sorted(set(every_script()) - self.ran)
        terminalreporter.write_line(
            f"==> Lua scripts no test ran on the Cluster: {', '.join(missing)}"
            if missing
            else "==> every Lua script ran on the Cluster"
        )

"""What a killed test session leaves behind, reaped by the next session of the same checkout.

A test run killed mid-way (Ctrl-C twice, a CI timeout, SIGKILL) never reaches the teardowns
that stop its redis-servers, PostgreSQLs and services (each runs in a session of its own, so
nothing else stops them) or remove their directories. So every pytest session that is not an
xdist worker gets a directory of its own, ``<tmp>/rg-tests-<checkout>/<pid>-<start>/``, made
the temporary directory of everything the session starts (``TMPDIR``: pytest's ``tmp_path``,
each redis-server's and PostgreSQL's data, the services' files), and marks its environment,
which its workers and every process they start inherit, with ``RG_TEST_SESSION=<checkout>
<pid> <start>`` (a name no service or test filters out, as they do ``RESETGATE_*``).

At its start a session reaps each sibling directory whose owner is gone (no process with
that pid and start time): it SIGKILLs every process marked with that owner, or whose working
directory lies in that directory (a redis-server and a PostgreSQL chdir to their data
directory), then removes the directory. A session that ends removes its own directory, unless
it failed: its logs stay for reading until the next session of this checkout.

Safe by construction: only this checkout's own directories are read, an owner still running
(another session of this checkout beside this one, e.g. `make test`'s Cluster pass) keeps
everything, and a process is killed only if it names a dead owner of this checkout or works
inside that owner's directory: never the machine's Redis on :6379, never another checkout's.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ENV = "RG_TEST_SESSION"
ROOT = Path(__file__).resolve().parents[2]


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/<pid>/stat, field 22), or
    None if no such process or only its zombie (a killed pytest whose parent never waits
    for it): with the pid, what names one process across pid reuse."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else fields[19]


def base(checkout: Path = ROOT, tmp: str | None = None) -> Path:
    digest = hashlib.blake2b(str(checkout).encode(), digest_size=6).hexdigest()
    return Path(tmp or tempfile.gettempdir()) / f"rg-tests-{digest}"


def alive(owner: str) -> bool:
    """Whether ``<pid>-<start>`` names a running process."""
    pid, _, start = owner.partition("-")
    return pid.isdigit() and start_time(int(pid)) == start


def _marker(pid: int) -> str | None:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    for entry in environ.split(b"\0"):
        if entry.startswith(ENV.encode() + b"="):
            return entry.split(b"=", 1)[1].decode(errors="replace")
    return None


def _inside(pid: int, directory: Path) -> bool:
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return False
    return cwd == str(directory) or cwd.startswith(f"{directory}/")


@dataclass
class Reaped:
    killed: list[int] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)


def reap(checkout: Path = ROOT, tmp: str | None = None) -> Reaped:
    """Kill what dead sessions of ``checkout`` left running and remove their directories."""
    reaped = Reaped()
    home = base(checkout, tmp)
    if not home.is_dir():
        return reaped
    dead = {d.name: d for d in home.iterdir() if d.is_dir() and not alive(d.name)}
    if not dead:
        return reaped
    marks = {f"{checkout} {owner.replace('-', ' ', 1)}": d for owner, d in dead.items()}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        pid = int(entry)
        marked = _marker(pid) in marks
        if marked or any(_inside(pid, d) for d in dead.values()):
            with contextlib.suppress(OSError):  # ended meanwhile
                os.kill(pid, signal.SIGKILL)
                reaped.killed.append(pid)
    for directory in dead.values():
        shutil.rmtree(directory, ignore_errors=True)
        reaped.removed.append(directory)
    return reaped


class Session:
    """The controlling pytest process's directory and mark (see the module)."""

    def __init__(self, checkout: Path = ROOT) -> None:
        self.reaped = reap(checkout)
        pid = os.getpid()
        owner = f"{pid}-{start_time(pid)}"
        self.directory = base(checkout) / owner
        self.directory.mkdir(parents=True, exist_ok=True)
        # PostgreSQL runs as nobody when the tests run as root: it must reach its data.
        for path in (self.directory.parent, self.directory):
            path.chmod(0o755)
        os.environ[ENV] = f"{checkout} {owner.replace('-', ' ', 1)}"
        os.environ["TMPDIR"] = str(self.directory)
        tempfile.tempdir = str(self.directory)
        self.failed = False

    @pytest.hookimpl
    def pytest_report_header(self) -> str:
        line = f"temporary files: {self.directory}"
        if self.reaped.killed or self.reaped.removed:
            line += (
                f" (reaped from killed sessions: {len(self.reaped.killed)} process(es), "
                f"{len(self.reaped.removed)} directory(ies))"
            )
        return line

    @pytest.hookimpl
    def pytest_sessionfinish(self, exitstatus: int) -> None:
        self.failed = exitstatus not in (0, 5)  # 5: no test selected

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self) -> None:
        if self.failed:
            print(f"\ntemporary files (logs) kept until the next session: {self.directory}")
        else:
            shutil.rmtree(self.directory, ignore_errors=True)


def configure(config: pytest.Config) -> None:
    """In the process that controls the run (not in an xdist worker, which inherits it)."""
    if hasattr(config, "workerinput"):
        return
    config.pluginmanager.register(Session(), "test-session-directory")

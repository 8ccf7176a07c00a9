"""A real PostgreSQL server for `resetgate up` and tests: initdb into a directory, pg_ctl
start on a loopback port, a database named ``resetgate``.

The binaries come from PATH, else from Debian's ``/usr/lib/postgresql/<version>/bin`` (the
``postgresql`` package; ``make`` installs it: tools/ensure-postgres.sh). PostgreSQL refuses
to run as root, so as root the server runs as ``nobody`` (setpriv), its directory theirs.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from services.ctl.ports import PORT_OFFSETS

DATABASE = "resetgate"
SUPERUSER = "postgres"
_DEBIAN = Path("/usr/lib/postgresql")
_AS = "nobody"


def pg_bin() -> Path:
    """The folder holding initdb and pg_ctl: PATH's, else Debian's newest."""
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    versions = sorted(
        (p for p in _DEBIAN.glob("*/bin") if (p / "pg_ctl").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    if not versions:
        raise RuntimeError(
            "no PostgreSQL server binaries: apt-get install postgresql (`make` runs "
            "tools/ensure-postgres.sh for you)"
        )
    return versions[-1]


class LocalPostgres:
    """One server on 127.0.0.1:``port`` with its data in ``directory`` (a fresh temporary
    one by default, removed by :meth:`stop`)."""

    def __init__(self, port: int, directory: Path | None = None) -> None:
        self.port = port
        self.owned = directory is None
        self.directory = directory or Path(tempfile.mkdtemp(prefix="rg-pg-"))
        self.bin = pg_bin()

    @property
    def data(self) -> Path:
        return self.directory / "data"

    @property
    def dsn(self) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{DATABASE}"

    def _as_owner(self, *argv: str | Path) -> list[str]:
        command = [str(a) for a in argv]
        if os.geteuid() != 0:
            return command
        return [
            "setpriv",
            f"--reuid={_AS}",
            f"--regid={pwd.getpwnam(_AS).pw_gid}",
            "--clear-groups",
            *command,
        ]

    def _run(self, *argv: str | Path, timeout: float = 60) -> None:
        subprocess.run(
            self._as_owner(*argv),
            check=True,
            timeout=timeout,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    def start(self) -> LocalPostgres:
        """initdb (once per directory), start, and create the database (once)."""
        if os.geteuid() == 0:
            os.chown(self.directory, pwd.getpwnam(_AS).pw_uid, -1)
        fresh = not (self.data / "PG_VERSION").exists()
        if fresh:
            self._run(
                self.bin / "initdb",
                "-D",
                self.data,
                "-U",
                SUPERUSER,
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
            )
        options = (
            f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1"
            " -c fsync=on -c max_connections=50"
        )
        self._run(
            self.bin / "pg_ctl",
            "-D",
            self.data,
            "-o",
            options,
            "-l",
            self.directory / "postgres.log",
            "-w",
            "-t",
            "60",
            "start",
        )
        if fresh:
            try:
                self._run(
                    self.bin / "createdb",
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(self.port),
                    "-U",
                    SUPERUSER,
                    DATABASE,
                )
            except subprocess.SubprocessError:
                self.stop()  # never leave a server running that nothing will stop
                raise
        return self

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``immediate``: as a crash would); the data stays (:meth:`close`
        removes a temporary directory)."""
        if (self.data / "postmaster.pid").exists():
            self._run(self.bin / "pg_ctl", "-D", self.data, "-m", mode, "-w", "stop")

    def close(self) -> None:
        self.stop()
        if self.owned:
            shutil.rmtree(self.directory, ignore_errors=True)


# `resetgate up`'s archive: PostgreSQL and the archiver's operational listener, at their
# offsets in the stack's one port table.
ARCHIVER_OPS = "archiver ops"
POSTGRES_OFFSET = PORT_OFFSETS["postgres"]
ARCHIVER_OFFSET = PORT_OFFSETS[ARCHIVER_OPS]


def local_archive(
    env: dict[str, str], directory: Path, port: int
) -> tuple[LocalPostgres | None, str]:
    """`resetgate up`'s archive: a local PostgreSQL on ``port`` (data in ``<dir>/postgres``,
    kept across runs), migrated, and the settings every service and the archiver read put
    in ``env``. None where RESETGATE_ARCHIVE_DSN names one already (used as it is) or no
    PostgreSQL is installed (Redis only); with a line for the banner saying which."""
    if env.get("RESETGATE_ARCHIVE_DSN"):
        env.setdefault("RESETGATE_ARCHIVE_ENABLED", "true")
        return None, "archive: from RESETGATE_ARCHIVE_DSN"
    data = data_directory(directory)
    try:
        server = LocalPostgres(port, data)
        data.mkdir(exist_ok=True)
        server.start()
    except (RuntimeError, OSError, subprocess.SubprocessError) as error:
        reason = getattr(error, "stderr", b"") or str(error).encode()
        first = reason.decode(errors="replace").strip().splitlines()[:1] or [type(error).__name__]
        return (
            None,
            f"archive: none, retention is Redis-only (PostgreSQL did not start: {first[0]})",
        )
    env["RESETGATE_ARCHIVE_DSN"] = server.dsn
    env["RESETGATE_ARCHIVE_ENABLED"] = "true"
    migrate = subprocess.run(
        [sys.executable, "-m", "services.ctl.main", "archive", "migrate"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if migrate.returncode != 0:
        server.stop()
        raise RuntimeError(f"the local archive did not migrate: {migrate.stderr.strip()}")
    return server, f"archive: PostgreSQL {server.dsn}, data in {data}"


def data_directory(directory: Path) -> Path:
    """``<dir>/postgres``; as root, a folder of the temporary directory named after ``<dir>``
    instead, since the server runs as nobody, who may not reach into ``<dir>``."""
    if os.geteuid() != 0:
        return directory / "postgres"
    digest = hashlib.blake2b(str(directory).encode(), digest_size=6).hexdigest()
    return Path(tempfile.gettempdir()) / f"resetgate-pg-{digest}"

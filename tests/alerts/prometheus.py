"""A real Prometheus server for end-to-end alert tests.

Starts the Debian package's `prometheus` binary on a free loopback port with a throwaway
config that scrapes the given targets every second and evaluates the shipped rules file
(charts/resetgate/files/alerts.rules.yml) every second, so a test can drive real services
and wait for the alert a responder would get:

    async with PrometheusServer(["127.0.0.1:8081", "127.0.0.1:8082"]) as prometheus:
        alert = await prometheus.wait_for_alert("OperationsExhausted", timeout=30)
        assert alert["labels"]["partition"] == "3"

Alerts with a long `for:` stay pending for that long in real time; wait for
`state="pending"` to see that the condition holds without waiting out the duration.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp
import yaml

from services.ctl.embedded import free_port
from tests.alerts.promql import RULES_FILE, ensure_binary

_READY_TIMEOUT = 30.0
_POLL = 0.25

Targets = Sequence[str] | Mapping[str, Sequence[str]]


class PrometheusServer:
    """One prometheus process; use as an async context manager or call start()/stop()."""

    def __init__(
        self,
        targets: Targets,
        *,
        rules_file: Path = RULES_FILE,
        binary: str | None = None,
        interval: str = "1s",
    ) -> None:
        # A plain list of host:port is one job, "resetgate"; a mapping names a job per
        # service so alerts carry a meaningful `job` label.
        self.jobs = dict(targets) if isinstance(targets, Mapping) else {"resetgate": targets}
        self.rules_file = rules_file
        self.binary = binary
        self.interval = interval
        self.port = 0
        self._workdir: tempfile.TemporaryDirectory[str] | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> PrometheusServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        binary = self.binary or ensure_binary("prometheus")
        self._workdir = tempfile.TemporaryDirectory(prefix="resetgate-prometheus-")
        workdir = Path(self._workdir.name)
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5))
        # The free port is found by binding and releasing it; another process can take it
        # in between, so a start that dies early is retried on a new port.
        for _ in range(3):
            self.port = free_port()  # below the ephemeral range: see free_port
            config = workdir / "prometheus.yml"
            config.write_text(yaml.safe_dump(self._config()))
            log = (workdir / "prometheus.log").open("wb")
            self._process = await asyncio.create_subprocess_exec(
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
                stdout=log,
                stderr=log,
            )
            log.close()
            if await self._wait_ready():
                return
        raise RuntimeError(f"prometheus did not start: {self.log_tail()}")

    async def stop(self) -> None:
        if self._process is not None and self._process.returncode is None:
            self._process.terminate()
            try:
                await asyncio.wait_for(self._process.wait(), timeout=10)
            except TimeoutError:
                self._process.kill()
                await self._process.wait()
        self._process = None
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._workdir is not None:
            self._workdir.cleanup()
            self._workdir = None

    def log_tail(self, chars: int = 4000) -> str:
        if self._workdir is None:
            return ""
        log = Path(self._workdir.name) / "prometheus.log"
        return log.read_text(errors="replace")[-chars:] if log.exists() else ""

    async def alerts(self) -> list[dict[str, Any]]:
        """Active alerts (pending and firing), as GET /api/v1/alerts returns them."""
        data = await self._get("/api/v1/alerts")
        alerts: list[dict[str, Any]] = data["alerts"]
        return alerts

    async def rules(self) -> list[dict[str, Any]]:
        """Every loaded rule with its health and last evaluation error."""
        data = await self._get("/api/v1/rules")
        return [rule for group in data["groups"] for rule in group["rules"]]

    async def query(self, expr: str) -> list[dict[str, Any]]:
        data = await self._get("/api/v1/query", params={"query": expr})
        result: list[dict[str, Any]] = data["result"]
        return result

    # `timeout` is part of the call (ASYNC109): the deadline is reported in the failure
    # message together with the alerts that were active, which asyncio.timeout() around the
    # call could not do.
    async def wait_for_alert(
        self,
        name: str,
        timeout: float,
        *,
        state: str = "firing",
        labels: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """The first alert called `name` in `state` whose labels include `labels`."""
        wanted = dict(labels or {})
        seen: list[dict[str, Any]] = []
        try:
            async with asyncio.timeout(timeout):
                while True:
                    seen = await self.alerts()
                    for alert in seen:
                        if _matches(alert, name, state, wanted):
                            return alert
                    await asyncio.sleep(_POLL)
        except TimeoutError:
            raise AssertionError(
                f"no {state} alert {name} {wanted} within {timeout}s; active alerts: "
                f"{[(a['labels'].get('alertname'), a['state'], a['labels']) for a in seen]}"
            ) from None

    async def wait_for_scrapes(self, timeout: float) -> None:
        """Wait until every target has been scraped successfully once."""
        expected = sum(len(targets) for targets in self.jobs.values())
        async with asyncio.timeout(timeout):
            while True:
                if len(await self.query("up == 1")) >= expected:
                    return
                await asyncio.sleep(_POLL)

    def _config(self) -> dict[str, Any]:
        return {
            "global": {
                "scrape_interval": self.interval,
                "scrape_timeout": self.interval,
                "evaluation_interval": self.interval,
            },
            "rule_files": [str(self.rules_file.resolve())],
            "scrape_configs": [
                {"job_name": job, "static_configs": [{"targets": list(targets)}]}
                for job, targets in self.jobs.items()
            ],
        }

    async def _wait_ready(self) -> bool:
        assert self._process is not None and self._session is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _READY_TIMEOUT
        while loop.time() < deadline and self._process.returncode is None:
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with self._session.get(f"{self.url}/-/ready") as response:
                    if response.status == 200:
                        return True
            await asyncio.sleep(_POLL)
        if self._process.returncode is None:
            raise RuntimeError(f"prometheus not ready in {_READY_TIMEOUT}s: {self.log_tail()}")
        await self._process.wait()
        return False

    async def _get(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        assert self._session is not None, "start() the server first"
        async with self._session.get(f"{self.url}{path}", params=params) as response:
            body: dict[str, Any] = await response.json()
        if body.get("status") != "success":
            raise RuntimeError(f"GET {path}: {body}")
        data: dict[str, Any] = body["data"]
        return data


def _matches(alert: dict[str, Any], name: str, state: str, labels: dict[str, str]) -> bool:
    got: dict[str, str] = alert["labels"]
    return (
        got.get("alertname") == name
        and alert["state"] == state
        and all(got.get(key) == value for key, value in labels.items())
    )

"""`resetgate up --prometheus`: a real Prometheus on its offset scrapes every service's
operational listener with the chart's alert rules loaded, so OldestEligibleAgeHigh can be
watched locally. Without the flag nothing listens there (the opposite harm: a Prometheus, its
disk and its port, nobody asked for): test_up.py's stack, started without it, checks that.

This is also the test of `resetgate up`'s local archive (the other stacks run --no-archive):
a PostgreSQL started and migrated, the archiver running and scraped."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from services.ctl import localpg, ports, prometheus
from tests.alerts.promql import ensure_binary
from tests.ctl.test_up import ctrl_c, listening, up_on_free_ports


async def api(base: str, path: str) -> Any:
    async with aiohttp.ClientSession() as session, session.get(base + path) as reply:
        assert reply.status == 200, await reply.text()
        return (await reply.json())["data"]


async def healthy_targets(base: str, wanted: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 60
    targets: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        targets = (await api(base, "/api/v1/targets"))["activeTargets"]
        if len(targets) == wanted and all(t["health"] == "up" for t in targets):
            return targets
        await asyncio.sleep(0.5)
    raise AssertionError(f"targets never all up: {targets}")


@pytest.mark.timeout(600)
async def test_up_with_prometheus_scrapes_every_service_with_the_charts_rules(
    tmp_path: Path,
) -> None:
    ensure_binary("prometheus")
    port, process, banner = await up_on_free_ports(tmp_path, "--prometheus", archive=True)
    try:
        base = f"http://127.0.0.1:{port + ports.PORT_OFFSETS['prometheus']}"
        assert f"prometheus http://127.0.0.1:{port + 9}  (the chart's alert rules" in banner
        # PostgreSQL is installed wherever the tests run (`make`: tools/ensure-postgres.sh).
        postgres = port + ports.PORT_OFFSETS["postgres"]
        assert f"archive: PostgreSQL postgresql://postgres@127.0.0.1:{postgres}/" in banner
        jobs = {"admission", "sender", "poller", "router", "archiver"}
        targets = await healthy_targets(base, len(jobs))
        assert {t["labels"]["job"] for t in targets} == jobs
        groups = (await api(base, "/api/v1/rules"))["groups"]
        assert {g["file"] for g in groups} == {str(prometheus.RULES_FILE)}
        names = {rule["name"] for group in groups for rule in group["rules"]}
        assert "OldestEligibleAgeHigh" in names
    finally:
        await ctrl_c(process)
        shutil.rmtree(localpg.data_directory(tmp_path), ignore_errors=True)
    assert not listening(port + ports.PORT_OFFSETS["prometheus"]), "stopped with the stack"

"""Schemathesis over the whole admission document (all 6 operations: public, internal,
operational) against the real process, as a caller WITHOUT the bearer and with a WRONG one,
every check on, positive and negative data, all four phases. tests/admission/test_process.py
runs the same with the right bearer (its stateful phase follows the document's links from an
admission to the operation, the account and token consumption).

Afterwards the server's own latency histogram says what every internal route answered: 401,
and nothing else, whatever schemathesis sent."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from redis.asyncio import Redis

from tests.admission.test_process import REPORT_MARGIN, SCHEMATHESIS_TIMEOUT
from tests.security.conftest import add_accounts
from tests.support.processes import Processes

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")


@pytest.mark.timeout(SCHEMATHESIS_TIMEOUT + REPORT_MARGIN)
@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong-token-0123456789abcdef"],
    ids=["no-bearer", "wrong-bearer"],
)
async def test_without_the_bearer_every_internal_answer_is_401_and_nothing_breaks(
    redis: Redis, stack: Processes, tmp_path: Path, authorization: str | None
) -> None:
    await add_accounts(redis, 5)
    admission = await stack.start("admission")  # IP limit off: a 429 is not what is tested
    # One worker: with threads, hypothesis's ast.parse on CPython 3.11 now and then raises a
    # spurious "AST constructor recursion depth mismatch" (python/cpython#106905).
    command = [
        str(SCHEMATHESIS),
        "run",
        f"{admission.url}/openapi.json",
        "--checks",
        "all",
        "--max-examples",
        "30",
        "--workers",
        "1",
        "--request-timeout",
        "5",
        "--report",
        "ndjson",
        "--report-dir",
        str(tmp_path),
    ]
    if authorization is not None:
        command += ["--header", f"Authorization: {authorization}"]
    run = await asyncio.to_thread(
        subprocess.run,
        command,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=SCHEMATHESIS_TIMEOUT,
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert "7/7" in run.stdout  # every operation in the document was selected

    answered = await _statuses_by_route(admission.ops_url)
    internal = {route: codes for route, codes in answered.items() if route.startswith("/internal/")}
    assert len(internal) == 5, answered  # every internal route in the document
    assert all(codes == {"401"} for codes in internal.values()), internal
    # The operational listener's own routes count in the same family: /readyz answers 503
    # until the service has Redis, which is what the harness polls while it starts.
    api = {route: codes for route, codes in answered.items() if route not in OPERATIONAL}
    assert not any(code.startswith("5") for codes in api.values() for code in codes), answered
    assert not [r for r in admission.log_records() if r.get("level") == "error"]
    sent = sum(1 for line in _ndjson(tmp_path) if "ScenarioFinished" in line)
    print(f"{authorization or 'no bearer'}: {sent} scenarios; answers by route: {answered}")


OPERATIONAL = {"/healthz", "/readyz", "/metrics"}


async def _statuses_by_route(url: str) -> dict[str, set[str]]:
    import aiohttp

    async with aiohttp.ClientSession() as session, session.get(url + "/metrics") as reply:
        text = await reply.text()
    answered: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "resetgate_http_request_duration_seconds_count" and sample.value:
                answered.setdefault(sample.labels["route"], set()).add(sample.labels["status"])
    return answered


def _ndjson(directory: Path) -> list[str]:
    lines: list[str] = []
    for path in directory.glob("**/*.ndjson"):
        lines.extend(line for line in path.read_text().splitlines() if line.strip())
    for line in lines[:1]:
        json.loads(line)  # it is what it claims to be
    return lines

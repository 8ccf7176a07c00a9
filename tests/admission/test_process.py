"""``python -m services.admission`` as a real process: fuzzed against its own OpenAPI document,
and stopped with SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import redis as sync_redis

from services.ctl.embedded import RedisServer
from shared.keys import directory_account, directory_login
from tests.admission.helpers import INTERNAL_TOKEN, admission_process

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")


def seed(url: str) -> None:
    """Accounts the document's examples name (acct-1, player@example.com), so the fuzzer
    reaches real admissions, operations and ledgers instead of 404s only."""
    client = sync_redis.Redis.from_url(url)
    client.flushall()
    for i in range(1, 6):
        client.hset(
            directory_account(f"acct-{i}"), mapping={"email": f"p{i}@example.com", "locale": "en"}
        )
        client.set(directory_login(f"player{i}"), f"acct-{i}")
    client.set(directory_login("player@example.com"), "acct-1")
    client.close()


# Schemathesis is CPU-bound: beside `make test`'s parallel workers on a loaded machine it
# took over 300 s (its 100 examples per operation then, 50 now). Only a hang waits this long.
SCHEMATHESIS_TIMEOUT = 600
# pytest-timeout's alarm must not fire while pytest still formats the TimeoutExpired above: a
# signal inside ast.parse leaves CPython 3.11's AST state broken (python/cpython#106905), and
# that worker's next report ended a whole `make test` run with an INTERNALERROR.
REPORT_MARGIN = 240


@pytest.mark.timeout(SCHEMATHESIS_TIMEOUT + REPORT_MARGIN)
def test_schemathesis_finds_no_server_error_and_no_drift_from_the_document(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    seed(redis_server.url)
    log = tmp_path / "admission.log"
    extra = {"RESETGATE_IP_LIMIT_PER_MINUTE": "6000", "RESETGATE_IP_LIMIT_BURST": "100"}
    with admission_process(redis_server.url, log, **extra) as (base, _):
        run = subprocess.run(
            [
                str(SCHEMATHESIS),
                "run",
                f"{base}/openapi.json",
                "--checks",
                "all",
                "--header",
                f"Authorization: Bearer {INTERNAL_TOKEN}",
                "--max-examples",
                "50",
                "--workers",
                "1",
                "--request-timeout",
                "5",
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=SCHEMATHESIS_TIMEOUT,
        )
    report = run.stdout[-6000:] + run.stderr[-2000:]
    assert run.returncode == 0, report
    assert "passed" in run.stdout
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    assert not [line for line in lines if line.get("msg") == "unhandled error"]


def test_sigterm_stops_the_service_gracefully(redis_server: RedisServer, tmp_path: Path) -> None:
    log = tmp_path / "admission.log"
    with admission_process(redis_server.url, log) as (_, process):
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    messages = [json.loads(line)["msg"] for line in log.read_text().splitlines()]
    assert messages[-1] == "service stopped"

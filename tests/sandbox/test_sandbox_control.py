"""The test-only routes, the helpers other suites use, and the process itself."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import aiohttp

from tests.support.sandbox import (
    SANDBOX_API_KEY,
    configure,
    reset,
    run_sandbox,
    run_sandbox_process,
    sandbox_stats,
    sent_emails,
)

ROOT = Path(__file__).resolve().parents[2]


async def test_config_can_be_read_and_changed_at_runtime(provider):
    before = await provider.control("GET", "/_sandbox/config")
    assert "api_key" not in before
    after = await provider.control(
        "POST", "/_sandbox/config", json={"error_every": 1, "retry_after_form": "rotate"}
    )
    assert (after["error_every"], after["retry_after_form"]) == (1, "rotate")
    assert (await provider.send()).status == 503


async def test_invalid_config_changes_are_refused_and_change_nothing(provider):
    for change in ({"port": 1}, {"no_such_setting": 1}, {"error_probability": 2}, [1]):
        async with provider.session.post(
            provider.base_url + "/_sandbox/config", json=change
        ) as response:
            assert response.status == 400
            assert (await response.json())["error"] == "invalid_request"
    assert (await provider.send()).status == 200


async def test_api_key_can_be_rotated_at_runtime(provider):
    await provider.control("POST", "/_sandbox/config", json={"api_key": "new-key"})
    assert (await provider.send()).status == 401
    provider.auth = {"Authorization": "Bearer new-key"}
    assert (await provider.send()).status == 200


async def test_stats_count_requests_and_sends_per_operation(provider):
    await provider.send(key="op-a")
    await provider.send(key="op-a")
    await provider.send(key="op-b")
    await provider.events()
    stats = await provider.stats()
    assert stats["requests_total"] == 4
    assert stats["requests_by_route"] == {"POST /email/send": 3, "GET /email/events": 1}
    assert stats["sent_by_operation"] == {"op-a": 1, "op-b": 1}
    assert stats["sent_by_key"] == {"op-a": 1, "op-b": 1}
    assert stats["duplicate_sends_total"] == 0
    one = await provider.stats(operation_id="op-a")
    assert one["sent_by_operation"] == {"op-a": 1}


async def test_unknown_routes_answer_json(provider):
    reply = await provider.get("/email/nothing")
    assert reply.status == 404
    assert reply.body["error"] == "http_error"
    wrong_method = await provider.request("DELETE", "/email/send")
    assert wrong_method.status == 405


async def test_testing_helpers_drive_a_sandbox():
    async with run_sandbox(delivered_delay_seconds=0) as base_url:
        assert base_url.startswith("http://127.0.0.1:")
        config = await configure(base_url, error_every=2)
        assert config["error_every"] == 2
        await configure(base_url, error_every=0)
        async with aiohttp.ClientSession() as session:
            headers = {"Authorization": f"Bearer {SANDBOX_API_KEY}", "Idempotency-Key": "op-h"}
            email = {"to": ["p@example.com"], "text": "t", "tags": {"operation_id": "op-h"}}
            async with session.post(f"{base_url}/email/send", json=email, headers=headers) as r:
                assert r.status == 200
        assert [m["email"]["text"] for m in await sent_emails(base_url, operation_id="op-h")] == [
            "t"
        ]
        assert (await sandbox_stats(base_url))["emails_sent_total"] == 1
        await reset(base_url)
        assert (await sandbox_stats(base_url))["emails_sent_total"] == 0


async def test_environment_does_not_leak_into_test_sandboxes(monkeypatch):
    monkeypatch.setenv("RESETGATE_SANDBOX_ERROR_EVERY", "1")
    async with run_sandbox() as base_url:
        config = await configure(base_url)
    assert config["error_every"] == 0


async def test_process_serves_and_stops_on_sigterm():
    async with run_sandbox_process(send_rate_per_second=1, send_burst=1) as base_url:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{base_url}/healthz") as response,
        ):
            assert response.status == 200
        assert (await configure(base_url))["send_rate_per_second"] == 1


async def test_process_logs_json_without_addresses_or_bodies(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESETGATE_")}
    env.update(
        RESETGATE_SANDBOX_PORT="0",
        RESETGATE_SANDBOX_LOG_LEVEL="DEBUG",
        RESETGATE_SANDBOX_DROP_EVERY="1",
        RESETGATE_SANDBOX_ERROR_EVERY="3",
    )
    log_path = tmp_path / "sandbox.log"
    with log_path.open("wb") as log_file:
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "services.sandbox", cwd=ROOT, env=env, stderr=log_file
        )
        port = await _port_from_log(log_path, child)
        base_url = f"http://127.0.0.1:{port}"
        async with aiohttp.ClientSession() as session:
            for i in range(3):
                email = {"to": ["secret.player@example.com"], "text": "link https://x/r?t=SECRET"}
                headers = {"Authorization": f"Bearer {SANDBOX_API_KEY}", "Idempotency-Key": f"k{i}"}
                try:
                    async with session.post(f"{base_url}/email/send", json=email, headers=headers):
                        pass
                except aiohttp.ClientConnectionError:
                    pass
        child.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(child.wait(), 60) == 0  # a bound against a hang only
    lines = log_path.read_text().splitlines()
    events = [json.loads(line)["msg"] for line in lines]
    assert events[0] == "sandbox.listening"
    assert {"sandbox.fault.drop", "sandbox.fault.error"} <= set(events)
    assert events[-1] == "sandbox.stopped"
    text = log_path.read_text()
    assert "secret.player" not in text
    assert "SECRET" not in text


async def _port_from_log(path: Path, child: asyncio.subprocess.Process) -> int:
    """The port the sandbox logs once it listens: waits for that line (a start-up on a busy
    machine takes what it takes) or for the process to end without it."""
    deadline = asyncio.get_running_loop().time() + 120  # only a hang ends here
    while child.returncode is None and asyncio.get_running_loop().time() < deadline:
        for line in (await asyncio.to_thread(path.read_text)).splitlines():
            record = json.loads(line)
            if record.get("msg") == "sandbox.listening":
                return int(record["port"])
        await asyncio.sleep(0.05)
    raise TimeoutError(f"sandbox never logged sandbox.listening (exit {child.returncode})")

"""`resetgate up` (what `make run` runs): the whole stack comes up and delivers a reset."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from services.ctl.embedded import free_port


def child_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("RESETGATE_")}


async def read_banner(process: asyncio.subprocess.Process) -> str:
    assert process.stdout is not None
    lines: list[str] = []
    while not any(line.startswith("Ctrl-C") for line in lines):
        line = (await process.stdout.readline()).decode()
        if not line:
            raise AssertionError("resetgate up exited before printing its banner")
        lines.append(line)
    return "".join(lines)


async def reset_is_accepted(base: str, token: str) -> dict[str, Any]:
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{base}/v1/password-resets", json={"login": "player1"}) as r:
            assert r.status == 202
        headers = {"Authorization": f"Bearer {token}"}
        url = f"{base}/internal/v1/accounts/acct-1001/recovery-operation"
        for _ in range(150):
            async with session.get(url, headers=headers) as r:
                view: dict[str, Any] = await r.json()
            if r.status == 200 and view.get("state") == "accepted":
                break
            await asyncio.sleep(0.2)
        return view


async def status_of(url: str) -> int:
    async with aiohttp.ClientSession() as session, session.get(url) as reply:
        return reply.status


@pytest.mark.parametrize("provider", ["http", "mailgun"])
async def test_up_runs_the_stack_and_a_reset_reaches_the_provider(
    tmp_path: Path, provider: str
) -> None:
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "services.ctl.main", "up", "--port", str(port),
        "--dir", str(tmp_path), "--provider", provider, env=child_env(),
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        banner = await asyncio.wait_for(read_banner(process), timeout=90)
        for name in ("admission", "sender", "poller", "router", "sandbox", "redis"):
            assert name in banner
        token = re.search(r"Bearer ([^'\s]+)", banner)
        assert token is not None
        view = await reset_is_accepted(f"http://127.0.0.1:{port}", token.group(1))
        assert view["state"] == "accepted"
        assert await status_of(f"http://127.0.0.1:{port}/metrics") == 404  # the API's port
        for ops_port in range(port + 1, port + 5):  # every service's operational listener
            assert f"http://127.0.0.1:{ops_port}  (/healthz /readyz /metrics)" in banner
            assert await status_of(f"http://127.0.0.1:{ops_port}/metrics") == 200
    finally:
        process.send_signal(signal.SIGINT)
        await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 0

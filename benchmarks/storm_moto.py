"""The storm's Amazon SES side (``benchmarks/storm.py --provider ses``): moto's server mode.

moto is a real third-party SES emulator, the one the tests use (tests/providers/
test_ses_moto.py); the issue rules out a home-made SES stand-in, so the sandbox has no SES
mode. What that means for the storm:

- moto never throttles and has no fault injection: only the plain scenarios run;
- moto reports the account's maximum send rate as 1 send/s (v1 GetSendQuota; SESv2
  GetAccount is not implemented), and the adapter takes a reported rate as the pacing
  ceiling, so the storm's provider rate, and its ideal, is that quota: N / 1 s;
- moto drops message tags, so an operation's emails are counted by recipient (every storm
  account has its own address) from moto's own record of sent messages.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
from aiobotocore.session import get_session

from services.ctl.embedded import free_port
from services.sender.settings import SenderSettings

REGION = "eu-west-1"
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": REGION,
    "AWS_DEFAULT_REGION": REGION,
}
# moto injects no faults and follows no schedule; it reports a daily quota (Max24HourSend
# 200) and never enforces it: the senders keep to it themselves (shared/quota.py).
SCENARIOS = ("ceiling-1.5", "ceiling-1.0", "restart", "quota")


def sender_domain() -> str:
    """The domain of the sender's default From address: verified in moto, or SES rejects."""
    email_from = SenderSettings.model_fields["email_from"].default
    return str(email_from).rsplit("@", 1)[1].rstrip(">")


@asynccontextmanager
async def moto_server(startup_seconds: float) -> AsyncIterator[str]:
    """moto.server on a free loopback port, the sender's domain verified; its URL."""
    port = free_port()
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "moto.server",
        "-H",
        "127.0.0.1",
        "-p",
        str(port),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **AWS_ENV},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        await _wait_up(url, startup_seconds)
        await _call(url, "verify_domain_identity", Domain=sender_domain())
        yield url
    finally:
        child.terminate()
        await asyncio.wait_for(child.wait(), timeout=10)


async def _wait_up(url: str, timeout: float) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        while asyncio.get_running_loop().time() < deadline:
            try:
                async with session.get(url + "/moto-api/") as response:
                    if response.status < 500:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError(f"moto server did not start within {timeout:.0f} s")


async def _call(url: str, call: str, **kwargs: Any) -> dict[str, Any]:
    async with get_session().create_client(
        "ses",
        region_name=REGION,
        endpoint_url=url,
        aws_access_key_id=AWS_ENV["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=AWS_ENV["AWS_SECRET_ACCESS_KEY"],
    ) as client:
        result: dict[str, Any] = await getattr(client, call)(**kwargs)
        return result


async def max_send_rate(url: str) -> float:
    """The quota moto reports (the adapter's pacing ceiling)."""
    return float((await _call(url, "get_send_quota"))["MaxSendRate"])


async def daily_quota(url: str) -> int:
    """moto's Max24HourSend (the senders read the same figure)."""
    return int((await _call(url, "get_send_quota"))["Max24HourSend"])


async def sent(url: str, addresses: list[str]) -> tuple[int, int, int]:
    """(messages moto sent, addresses sent to more than once, addresses never sent to)."""
    timeout = aiohttp.ClientTimeout(total=60)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.get(url + "/moto-api/data.json") as response,
    ):
        data = await response.json(content_type=None)
    messages = data.get("ses", {}).get("Message", [])
    per_address: Counter[str] = Counter(
        to for m in messages for to in m.get("destinations", {}).get("ToAddresses", [])
    )
    duplicates = sum(1 for a in addresses if per_address[a] > 1)
    lost = sum(1 for a in addresses if per_address[a] == 0)
    return len(messages), duplicates, lost

"""Helpers for tests that need a provider: a real sandbox HTTP server on a free loopback port.

    async with run_sandbox(send_rate_per_second=5, retry_after_form="rotate") as base_url:
        ...  # point the sender at base_url with SANDBOX_API_KEY
        await configure(base_url, error_probability=1.0)   # flip a fault mid-test
        stats = await sandbox_stats(base_url)

``run_sandbox`` serves from the test's own event loop; ``run_sandbox_process`` runs
``python -m services.sandbox`` as a child process (for storms, or to keep the sandbox
answering while the test blocks). The environment never leaks into either: only the
keyword arguments and the defaults apply.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
from pydantic import SecretStr
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from services.ctl.embedded import free_port
from services.sandbox.server import start
from services.sandbox.settings import SandboxSettings
from tests.support.processes import START_TIMEOUT, listens

SANDBOX_API_KEY = "sandbox-key"
_PROJECT_ROOT = Path(__file__).resolve().parents[2]
_ENV_PREFIX = "RESETGATE_SANDBOX_"


class _ExplicitSettings(SandboxSettings):
    """SandboxSettings from keyword arguments only: a stray env var cannot change a test."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


def sandbox_settings(**overrides: Any) -> SandboxSettings:
    """Settings for a test sandbox: loopback, a free port, and ``overrides``."""
    values: dict[str, Any] = {"host": "127.0.0.1", "port": 0, "api_key": SANDBOX_API_KEY}
    values.update(overrides)
    return _ExplicitSettings(**values)


@asynccontextmanager
async def run_sandbox(**overrides: Any) -> AsyncIterator[str]:
    """Serve a sandbox in this event loop; yields its base URL (``http://127.0.0.1:PORT``)."""
    runner, port = await start(sandbox_settings(**overrides))
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def _child_env(settings: SandboxSettings) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_ENV_PREFIX)}
    for name, value in settings.model_dump(mode="json").items():
        if value is None:
            continue
        secret = getattr(settings, name)
        if isinstance(secret, SecretStr):
            value = secret.get_secret_value()
        text = str(value).lower() if isinstance(value, bool) else str(value)
        env[f"{_ENV_PREFIX}{name.upper()}"] = text
    return env


async def _wait_healthy(base_url: str, child: asyncio.subprocess.Process) -> None:
    async with aiohttp.ClientSession() as session:
        while True:
            if child.returncode is not None:
                raise RuntimeError(f"sandbox exited early with code {child.returncode}")
            try:
                async with session.get(f"{base_url}/healthz") as response:
                    # Only the child's answer counts: another process may have taken the
                    # port between its pick and the child's bind.
                    if response.status == 200 and listens(child.pid, response.url.port or 0):
                        return
            except aiohttp.ClientConnectionError:
                pass
            await asyncio.sleep(0.05)


@asynccontextmanager
async def run_sandbox_process(
    startup_timeout: float = START_TIMEOUT,
    **overrides: Any,
) -> AsyncIterator[str]:
    """Run ``python -m services.sandbox`` as a child; yields its base URL; SIGTERM on exit."""
    settings = sandbox_settings(**{"port": free_port(), **overrides})
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "services.sandbox", cwd=_PROJECT_ROOT, env=_child_env(settings)
    )
    base_url = f"http://127.0.0.1:{settings.port}"
    try:
        async with asyncio.timeout(startup_timeout):
            await _wait_healthy(base_url, child)
        yield base_url
    finally:
        if child.returncode is None:
            child.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(child.wait(), timeout=10)
            except TimeoutError:
                child.kill()
                await child.wait()


async def _control(method: str, url: str, **kwargs: Any) -> Any:
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, url, **kwargs) as response,
    ):
        body = await response.json()
        if response.status != 200:
            raise ValueError(f"sandbox control call failed ({response.status}): {body}")
        return body


async def configure(base_url: str, **changes: Any) -> dict[str, Any]:
    """Change settings of a running sandbox (faults, rates, ...); returns the new config."""
    result: dict[str, Any] = await _control("POST", f"{base_url}/_sandbox/config", json=changes)
    return result


async def reset(base_url: str) -> None:
    """Forget every message, event and counter of a running sandbox."""
    await _control("POST", f"{base_url}/_sandbox/reset")


async def sandbox_stats(base_url: str, **query: str) -> dict[str, Any]:
    """``GET /_sandbox/stats`` (query: ``operation_id`` and/or ``idempotency_key``)."""
    result: dict[str, Any] = await _control("GET", f"{base_url}/_sandbox/stats", params=query)
    return result


async def sent_emails(base_url: str, **query: str) -> list[dict[str, Any]]:
    """Emails the sandbox really sent for an ``operation_id`` or ``idempotency_key``."""
    body = await _control("GET", f"{base_url}/_sandbox/messages", params=query)
    data: list[dict[str, Any]] = body["data"]
    return data

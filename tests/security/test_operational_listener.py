"""The operational routes (/healthz, /readyz, /metrics) live on their own listener.

Found by attack (docs/security.md): admission served /metrics on its public port, and
``resetgate_admissions_total{result=...}`` moved by ``unknown_login`` for an unknown login and
by ``created``/``converged``/``cooldown`` for a known one, which enumerates accounts. Now the
public port answers 404 for every operational path, and the operational listener
(``RESETGATE_METRICS_PORT``) is up from process start: alive at once, ready only once Redis
answers, so a pod started during a Redis failover is not restarted by its liveness probe.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest
from redis.asyncio import Redis

from services.ctl.embedded import RedisServer, free_port
from tests.security.conftest import add_accounts, base_env
from tests.support.processes import START_TIMEOUT, Processes, ServiceProcess

OPERATIONAL = ("/metrics", "/healthz", "/readyz")


async def _get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as reply:
        return reply.status, await reply.text()


async def test_admission_public_port_serves_nothing_operational(
    stack: Processes, redis: Redis
) -> None:
    admission = await stack.start("admission")
    [(login, _)] = await add_accounts(redis, 1)
    async with aiohttp.ClientSession() as session:
        for who in (login, "nobody@example.com"):
            async with session.post(
                admission.url + "/v1/password-resets", json={"login": who}
            ) as reply:
                assert reply.status == 202
    for path in OPERATIONAL:
        status, body = await _get(admission.url + path)
        assert status == 404, (path, status)
        assert "resetgate_" not in body
    status, page = await _get(admission.ops_url + "/metrics")
    assert status == 200
    assert 'result="unknown_login"' in page  # the counters exist, on the operational port only
    assert (await _get(admission.ops_url + "/readyz"))[0] == 200


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", ["admission", "sender", "poller", "router"])
async def test_operational_listener_answers_before_redis_does(tmp_path: Path, name: str) -> None:
    """Started with no Redis at its URL: /healthz 200 at once, /readyz 503 until Redis is
    there, then 200 from the same process."""
    port = free_port()
    env = base_env(
        f"redis://127.0.0.1:{port}/0",
        RESETGATE_REDIS_TIMEOUT_SECONDS="0.5",
        RESETGATE_PROVIDER_API_KEY="k" * 20,
        RESETGATE_LOG_LEVEL="INFO",
    )
    service = ServiceProcess(name, env, tmp_path)
    server = RedisServer(port)
    try:
        await _launch(service)
        assert await _poll(service.ops_url + "/healthz", 200)
        status, body = await _get(service.ops_url + "/readyz")
        assert status == 503 and '"started":false' in body.replace(" ", "")
        server.start()
        assert await _poll(service.ops_url + "/readyz", 200)
        assert service.running
    finally:
        await service.stop()
        server.stop()


async def _launch(service: ServiceProcess) -> None:
    """Start the process without waiting for readiness (which cannot come yet)."""
    service.ready_path = "/healthz"
    await service.start()


async def _poll(url: str, status: int, within: float = START_TIMEOUT) -> bool:
    async with asyncio.timeout(within):
        while True:
            try:
                if (await _get(url))[0] == status:
                    return True
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)


async def test_sigterm_while_waiting_for_redis_ends_the_start_cleanly(tmp_path: Path) -> None:
    """The process is visible (alive) before it is serving, so it may be stopped then too: a
    clean exit, not a death by signal."""
    env = base_env(f"redis://127.0.0.1:{free_port()}/0", RESETGATE_LOG_LEVEL="INFO")
    service = ServiceProcess("admission", env, tmp_path)
    await _launch(service)
    assert await service.stop(timeout=10) == 0
    assert "service stopped while starting" in service.logs()

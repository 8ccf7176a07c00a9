"""End to end: real services scraped by a real Prometheus; an operation driven to
exhaustion pages, read back from the Prometheus HTTP API."""

from __future__ import annotations

from pathlib import Path

from redis.asyncio import Redis

from services.ctl.embedded import RedisServer
from shared.admit import Admitter
from shared.directory import Account, RedisDirectory
from shared.keys import CONTROL, PartitionKeys
from shared.tokens import parse_keys
from tests.alerts.prometheus import PrometheusServer
from tests.conftest import TEST_TOKEN_KEYS, make_settings
from tests.support.processes import Processes
from tests.support.sandbox import SANDBOX_API_KEY, run_sandbox


async def test_an_exhausted_operation_pages_through_a_real_prometheus(
    redis: Redis, redis_server: RedisServer, tmp_path: Path
) -> None:
    async with run_sandbox(error_probability=1.0) as provider_url:
        env = {
            "RESETGATE_REDIS_URL": redis_server.url,
            "RESETGATE_PROVIDER_URL": provider_url,
            "RESETGATE_PROVIDER_API_KEY": SANDBOX_API_KEY,
            "RESETGATE_TOKEN_KEYS": TEST_TOKEN_KEYS,
            "RESETGATE_PARTITIONS": "4",
            "RESETGATE_MAX_ATTEMPTS": "2",
            "RESETGATE_BACKOFF_BASE_SECONDS": "0.05",
            "RESETGATE_BACKOFF_CAP_SECONDS": "0.1",
        }
        async with Processes(tmp_path, env) as services:
            sender = await services.start("sender")
            async with PrometheusServer(
                {"sender": [f"127.0.0.1:{sender.metrics_port}"]}
            ) as prometheus:
                await prometheus.wait_for_scrapes(timeout=30)
                settings = make_settings(redis_server.url)
                await RedisDirectory(redis).add("p1", Account("acct-page", "p1@example.com"))
                admission = await Admitter(redis, settings, parse_keys(TEST_TOKEN_KEYS)).admit(
                    "acct-page", "public"
                )
                alert = await prometheus.wait_for_alert("OperationsExhausted", timeout=60)
    partition = str(PartitionKeys.of(admission.operation_id).partition)
    assert alert["labels"]["severity"] == "page"
    assert alert["labels"]["partition"] == partition
    assert alert["labels"]["reason"] == "max_attempts"
    assert alert["annotations"]["runbook_url"].endswith("#operations-exhausted")


async def test_a_partition_whose_provider_no_sender_has_is_loud_on_real_processes(
    redis: Redis, redis_server: RedisServer, tmp_path: Path
) -> None:
    """Partitions left assigned to `primary` after a two-provider run: the sender logs it,
    exports it, Prometheus raises the page (pending: its `for` is 5 minutes), and the
    operation admitted there waits with 0 attempts while partition 1 sends."""
    await redis.hset(CONTROL, "provider:0", "primary")
    async with run_sandbox() as provider_url:
        env = {
            "RESETGATE_REDIS_URL": redis_server.url,
            "RESETGATE_PROVIDER_URL": provider_url,
            "RESETGATE_PROVIDER_API_KEY": SANDBOX_API_KEY,
            "RESETGATE_TOKEN_KEYS": TEST_TOKEN_KEYS,
            "RESETGATE_PARTITIONS": "4",
        }
        async with Processes(tmp_path, env) as services:
            sender = await services.start("sender")
            async with PrometheusServer(
                {"sender": [f"127.0.0.1:{sender.metrics_port}"]}
            ) as prometheus:
                await prometheus.wait_for_scrapes(timeout=30)
                alert = await prometheus.wait_for_alert(
                    "PartitionProviderNotConfigured", timeout=60, state="pending"
                )
            served = await sender.metric("resetgate_partition_unserved", partition="1")
            unserved = await sender.metric(
                "resetgate_partition_unserved", partition="0", provider="primary"
            )
    assert alert["labels"]["partition"] == "0" and alert["labels"]["provider"] == "primary"
    assert alert["labels"]["severity"] == "page"
    assert (unserved, served) == (1.0, 0.0)
    lines = [
        r
        for r in sender.log_records()
        if str(r.get("msg", "")).startswith("partitions assigned to a provider not")
    ]
    assert lines and lines[0]["partitions"] == [0] and lines[0]["providers"] == ["primary"]
    assert lines[0]["configured"] == ["default"]

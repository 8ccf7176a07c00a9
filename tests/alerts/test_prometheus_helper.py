"""The end-to-end helper itself: a real prometheus scrapes tiny exporters and evaluates the
shipped rules, and the exhausted-operation page fires within seconds."""

from __future__ import annotations

import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from tests.alerts.prometheus import PrometheusServer

pytestmark = pytest.mark.timeout(60)


def service_registry(*, exhausted: bool) -> CollectorRegistry:
    """What a sender replica exports, in a registry of its own (not the process default)."""
    registry = CollectorRegistry()
    Gauge("resetgate_token_ttl_seconds", "ttl", registry=registry).set(3600)
    age = Gauge("resetgate_oldest_eligible_age_seconds", "age", ["partition"], registry=registry)
    age.labels("3").set(12)
    age.labels("4").set(0)
    depth = Gauge("resetgate_queue_depth", "depth", ["partition", "queue"], registry=registry)
    depth.labels("3", "send").set(2)
    if exhausted:
        counter = Counter(
            "resetgate_operations_exhausted", "x", ["partition", "reason"], registry=registry
        )
        counter.labels("3", "max_attempts").inc()
    return registry


async def serve(registry: CollectorRegistry) -> tuple[web.AppRunner, str]:
    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(registry), content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    return runner, f"{host}:{port}"


async def test_exhausted_operation_pages_through_a_real_prometheus() -> None:
    runners = []
    try:
        # Two replicas: the one-to-many TTL division and the per-partition max() have to
        # cope with duplicate series, which only real scrapes produce.
        for exhausted in (True, False):
            runners.append(await serve(service_registry(exhausted=exhausted)))
        targets = {"sender": [address for _, address in runners]}
        async with PrometheusServer(targets) as prometheus:
            alert = await prometheus.wait_for_alert("OperationsExhausted", timeout=30)
            assert alert["labels"]["partition"] == "3"
            assert alert["labels"]["reason"] == "max_attempts"
            assert alert["labels"]["severity"] == "page"
            assert alert["annotations"]["runbook_url"] == "docs/runbook.md#operations-exhausted"

            # Send work and no attempts: the stall page's condition holds, and it waits out
            # its `for:` as pending; a young queue raises no age page at all.
            stalled = await prometheus.wait_for_alert(
                "SendersStalled", timeout=10, state="pending", labels={"partition": "3"}
            )
            assert stalled["labels"]["severity"] == "page"
            await prometheus.wait_for_scrapes(timeout=10)
            active = {a["labels"]["alertname"] for a in await prometheus.alerts()}
            assert "OldestEligibleAgeHigh" not in active
            broken = [
                (r["name"], r.get("lastError"))
                for r in await prometheus.rules()
                if r["health"] != "ok"
            ]
            assert not broken
    finally:
        for runner, _ in runners:
            await runner.cleanup()


async def test_wait_for_alert_reports_what_is_active_on_timeout() -> None:
    async with PrometheusServer({"sender": []}) as prometheus:
        with pytest.raises(AssertionError, match="no firing alert OperationsExhausted"):
            await prometheus.wait_for_alert("OperationsExhausted", timeout=2)

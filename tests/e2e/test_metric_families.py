"""Each running service exports its own resetgate families and no other: a gauge another
service never sets would read 0 there and hide the absent() the alerts depend on
(resetgate_token_ttl_seconds from the poller or router would silence AlertInputsMissing)."""

from __future__ import annotations

import ast
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from shared import metrics
from tests.e2e.conftest import E2E

SERVICES = Path(__file__).resolve().parents[2] / "services"
CORE = ("admission", "sender", "poller", "router")


def names(families: tuple[object, ...]) -> set[str]:
    return {family._name for family in families}  # type: ignore[attr-defined]


def used_in(package: str) -> set[str]:
    """The shared.metrics attributes a service package's code touches (``metrics.x``)."""
    found: set[str] = set()
    for path in (SERVICES / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "metrics"
            ):
                found.add(node.attr)
    return found


def test_the_ownership_table_covers_what_each_service_sets() -> None:
    for service in CORE:
        owned = {*metrics.COMMON, *metrics.OWNERS[service]}
        touched = {getattr(metrics, name) for name in used_in(service)}
        missing = names(tuple(touched - owned))
        assert not missing, f"{service} sets {missing} but does not export them"


def test_every_family_has_an_owner() -> None:
    # A family nobody owns is exported by every service (export_only keeps it rather than
    # hide it): say in metrics.OWNERS which service sets it.
    owned = names((*metrics.COMMON, *(f for fams in metrics.OWNERS.values() for f in fams)))
    assert not names(tuple(metrics.families())) - owned


async def test_each_service_exports_only_its_own_families(live: E2E) -> None:
    every = names(tuple(metrics.families()))
    for service in CORE:
        text = await live[service].metrics_text()
        exported = {
            family.name for family in text_string_to_metric_families(text)
        } & every  # process_* and python_* collectors stay
        allowed = names((*metrics.COMMON, *metrics.OWNERS[service]))
        assert exported <= allowed, f"{service} exports {exported - allowed}"
        # every service says which eviction policy its Redis runs
        assert 'resetgate_redis_maxmemory_policy{policy="noeviction"} 1.0' in text, service
    poller = await live["poller"].metrics_text()
    router = await live["router"].metrics_text()
    assert "resetgate_token_ttl_seconds" not in poller + router
    assert "resetgate_token_ttl_seconds " in await live["sender"].metrics_text()

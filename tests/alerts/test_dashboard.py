"""The Grafana dashboard: every panel query is PromQL that promtool parses, names only metrics
the services export (or series the rules file records), and the panels on-call needs exist."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from tests.alerts.promql import (
    DASHBOARD,
    exported_metric_names,
    metric_names,
    recorded_names,
    run_promtool,
)

# Grafana expands these before the query reaches Prometheus; any valid value will do for
# parsing.
GRAFANA_VARIABLES = {
    "$__rate_interval": "5m",
    "$__interval": "1m",
    "$__range": "1h",
    "${partition}": ".*",
    "$partition": ".*",
    "$namespace": "prod",
    "$release": ".*",
}
# The questions the dashboard has to answer, by the series that answer them.
REQUIRED = {
    "queue age per partition": "resetgate_oldest_eligible_age_seconds",
    "attempts by outcome": "resetgate_send_attempts_total",
    "pacing rate": "resetgate_pacing_rate",
    "exhausted": "resetgate_operations_exhausted_total",
    "ambiguous": "resetgate_ambiguous_attempts_total",
    "observation lag": "resetgate_observation_lag_seconds_bucket",
    "queue depth": "resetgate_queue_depth",
    "reconciliations": "resetgate_reconciliations_total",
    "support cases": "resetgate_support_cases_total",
    "admission error rate": "resetgate_http_request_duration_seconds_count",
}


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


def panels(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for item in items:
        yield item
        yield from panels(item.get("panels", []))


def queries() -> list[tuple[str, str]]:
    """(panel title, expression) for every query target."""
    return [
        (panel["title"], target["expr"])
        for panel in panels(dashboard()["panels"])
        for target in panel.get("targets", [])
    ]


def expand(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, f"unknown Grafana variable in {expr}"
    return expr


def test_every_panel_query_parses_as_promql(tmp_path: Path) -> None:
    # promtool parses each expression as a recording rule; `check rules` reports the
    # PromQL parse error with the rule's index, which maps back to the panel.
    found = queries()
    assert found
    rules = [
        {"record": f"dashboard:query_{index}:expr", "expr": expand(expr)}
        for index, (_, expr) in enumerate(found)
    ]
    path = tmp_path / "dashboard.rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = run_promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(rules)} rules found" in result.stdout


def test_panel_queries_name_only_exported_metrics() -> None:
    allowed = exported_metric_names() | recorded_names()
    for title, expr in queries():
        unknown = metric_names(expand(expr)) - allowed
        assert not unknown, f"panel {title!r}: not exported {unknown}"


def test_template_variables_query_exported_metrics() -> None:
    exported = exported_metric_names()
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] == "query":
            match = re.fullmatch(
                r"label_values\((\w+)(?:\{[^}]*\})?, *(\w+)\)", variable["definition"]
            )
            assert match, variable["name"]
            assert match.group(1) in exported, variable["name"]


def test_the_panels_on_call_needs_are_there() -> None:
    named = set().union(*(metric_names(expand(expr)) for _, expr in queries()))
    missing = {question for question, metric in REQUIRED.items() if metric not in named}
    assert not missing
    share = [expr for _, expr in queries() if 'outcome="throttled"' in expr and "/" in expr]
    assert share, "no 429 share panel (throttled / all attempts)"


def test_every_query_reads_one_release() -> None:
    # In a shared Prometheus a panel without the namespace (and, for scraped series, the
    # release) matchers would add prod and staging together.
    names = {variable["name"] for variable in dashboard()["templating"]["list"]}
    assert {"namespace", "release"} <= names
    for title, expr in queries():
        for name in metric_names(expand(expr)):
            for match in re.finditer(rf"(?<![\w:]){re.escape(name)}(\{{[^}}]*\}})?", expr):
                matchers = match.group(1) or ""
                assert 'namespace="$namespace"' in matchers, f"{title}: {name}"
                if ":" not in name:  # recorded series are aggregated by namespace only
                    assert 'release=~"$release"' in matchers, f"{title}: {name}"


def test_admission_error_rate_is_shown() -> None:
    share = [
        expr for _, expr in queries() if 'service="admission"' in expr and 'status=~"5.."' in expr
    ]
    assert share and all("/" in expr for expr in share)


def test_queue_age_is_shown_per_partition() -> None:
    age = [expr for _, expr in queries() if "resetgate_oldest_eligible_age_seconds" in expr]
    assert any("by (partition)" in expr for expr in age)


def test_panels_have_unique_ids_and_use_the_datasource_variable() -> None:
    all_panels = list(panels(dashboard()["panels"]))
    ids = [panel["id"] for panel in all_panels]
    assert len(ids) == len(set(ids))
    for panel in all_panels:
        if panel.get("targets"):
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]

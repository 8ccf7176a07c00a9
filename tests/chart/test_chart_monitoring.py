"""ServiceMonitor and PrometheusRule: the deployed rules are the promtool-tested file."""

from __future__ import annotations

import json
from typing import Any

import yaml
from helmchart import BASE, CORE, RELEASE, Helm, of_kind

from tests.alerts.promql import (
    DASHBOARD,
    RULES_FILE,
    SELECTOR_PLACEHOLDER,
    TEST_SELECTOR,
    render_rules,
)

RUNBOOK_BASE = "https://git.example.test/team/resetgate/blob/main/docs/runbook.md"
MONITORING = {
    "metrics.prometheusRule.enabled": True,
    "metrics.prometheusRule.labels": {"release": "kps"},
    "metrics.runbookBaseUrl": RUNBOOK_BASE,
}


def expected_groups(selector: str) -> list[dict[str, Any]]:
    """The rules file as tests/alerts renders it, plus what only the chart adds."""
    groups: list[dict[str, Any]] = yaml.safe_load(render_rules(selector))["groups"]
    for rule in (rule for group in groups for rule in group["rules"]):
        if "alert" in rule:
            rule["labels"]["release"] = RELEASE
            anchor = rule["annotations"]["runbook_url"].removeprefix("docs/runbook.md")
            rule["annotations"]["runbook_url"] = RUNBOOK_BASE + anchor
    return groups


def test_prometheus_rule_is_the_tested_rules_file_for_this_release(helm: Helm) -> None:
    docs = helm.template(MONITORING, extra=["--namespace", "prod"])
    (rule,) = of_kind(docs, "PrometheusRule").values()
    # Equal data, so helm evaluated none of the {{ $labels }} templates in annotations, and
    # the selector is the one the promtool tests use.
    assert rule["spec"]["groups"] == expected_groups(TEST_SELECTOR)
    assert rule["metadata"]["labels"]["release"] == "kps"
    assert SELECTOR_PLACEHOLDER in RULES_FILE.read_text()
    assert SELECTOR_PLACEHOLDER not in yaml.safe_dump(rule)


def test_prometheus_rule_selector_can_be_set(helm: Helm) -> None:
    selector = 'namespace=~"prod|prod-eu"'
    docs = helm.template({**MONITORING, "metrics.prometheusRule.selector": selector})
    (rule,) = of_kind(docs, "PrometheusRule").values()
    assert rule["spec"]["groups"] == expected_groups(selector)
    # a matcher on another label would never match the recorded series (they keep only
    # namespace), so the alerts built on them would never fire: refused
    for bad in ('namespace="prod",cluster="eu1"', 'cluster="eu1"', "namespace=prod"):
        error = helm.template_error({**BASE, **MONITORING, "metrics.prometheusRule.selector": bad})
        assert "must be one matcher on namespace" in error, bad


def test_alert_links_are_absolute_and_required(helm: Helm) -> None:
    docs = helm.template(MONITORING)
    (rule,) = of_kind(docs, "PrometheusRule").values()
    urls = [
        r["annotations"]["runbook_url"]
        for g in rule["spec"]["groups"]
        for r in g["rules"]
        if "alert" in r
    ]
    assert urls and all(url.startswith(RUNBOOK_BASE + "#") for url in urls)
    error = helm.template_error(
        {**BASE, "metrics.prometheusRule.enabled": True, "metrics.runbookBaseUrl": ""}
    )
    assert "metrics.runbookBaseUrl" in error


def test_dashboard_ships_to_the_grafana_sidecar(helm: Helm) -> None:
    docs = helm.template(
        {"metrics.dashboard.enabled": True, "metrics.runbookBaseUrl": RUNBOOK_BASE}
    )
    (configmap,) = (d for d in of_kind(docs, "ConfigMap").values() if "resetgate.json" in d["data"])
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = json.loads(configmap["data"]["resetgate.json"])
    source = json.loads(DASHBOARD.read_text())
    assert [link["url"] for link in shipped["links"]] == [RUNBOOK_BASE]
    shipped["links"] = source["links"]
    assert shipped == source
    variables = {v["name"] for v in shipped["templating"]["list"]}
    assert {"namespace", "release"} <= variables


def test_service_monitor_scrapes_the_four_services(helm: Helm) -> None:
    docs = helm.template(
        {
            "metrics.serviceMonitor.enabled": True,
            "sandbox.enabled": True,
            "metrics.serviceMonitor.labels": {"release": "kps"},
        }
    )
    (monitor,) = of_kind(docs, "ServiceMonitor").values()
    spec = monitor["spec"]
    assert monitor["metadata"]["labels"]["release"] == "kps"
    assert spec["namespaceSelector"] == {"matchNames": ["default"]}
    assert spec["selector"]["matchExpressions"] == [
        {
            "key": "app.kubernetes.io/component",
            "operator": "In",
            "values": ["admission", "sender", "poller", "router"],
        }
    ]
    (endpoint,) = spec["endpoints"]
    assert endpoint["port"] == "metrics"
    assert endpoint["path"] == "/metrics"
    assert (endpoint["interval"], endpoint["scrapeTimeout"]) == ("30s", "10s")
    # the dashboard's release variable reads this label
    assert endpoint["relabelings"] == [
        {
            "sourceLabels": ["__meta_kubernetes_service_label_app_kubernetes_io_instance"],
            "targetLabel": "release",
        }
    ]
    # every Service it selects has the metrics port; only admission's also has the API
    for name, service in of_kind(docs, "Service").items():
        if service["metadata"]["labels"]["app.kubernetes.io/component"] not in CORE:
            continue  # the sandbox and the dev Redis are not scraped
        ports = [p["name"] for p in service["spec"]["ports"]]
        assert ports == (["http", "metrics"] if name.endswith("admission") else ["metrics"])


def test_no_operator_objects_by_default(helm: Helm) -> None:
    docs = helm.template()
    assert not of_kind(docs, "ServiceMonitor")
    assert not of_kind(docs, "PrometheusRule")
    assert len(of_kind(docs, "ConfigMap")) == 1  # the settings, no dashboard

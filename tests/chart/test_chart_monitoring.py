"""ServiceMonitor and PrometheusRule: the deployed rules are the promtool-tested file."""

from __future__ import annotations

import yaml
from helmchart import CHART, CORE, Helm, of_kind

RULES_FILE = CHART / "files" / "alerts.rules.yml"


def test_prometheus_rule_groups_are_the_rules_file_groups(helm: Helm) -> None:
    docs = helm.template(
        {
            "metrics.prometheusRule.enabled": True,
            "metrics.prometheusRule.labels": {"release": "kps"},
        }
    )
    (rule,) = of_kind(docs, "PrometheusRule").values()
    # Equal data, so helm evaluated none of the {{ $labels }} templates in annotations.
    assert rule["spec"]["groups"] == yaml.safe_load(RULES_FILE.read_text())["groups"]
    assert rule["metadata"]["labels"]["release"] == "kps"


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
    assert spec["endpoints"] == [
        {"port": "metrics", "path": "/metrics", "interval": "30s", "scrapeTimeout": "10s"}
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

"""NetworkPolicy: admission's API open on 8080, every metrics port (/metrics, /healthz,
/readyz) open to Prometheus only, egress to DNS, Redis and (sender, poller) the provider,
nothing else."""

from __future__ import annotations

from typing import Any

from helmchart import CORE, Helm, Manifest, name_of, of_kind

PROMETHEUS = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
}
HTTP = [{"port": "http", "protocol": "TCP"}]
METRICS = [{"port": "metrics", "protocol": "TCP"}]


def policies(helm: Helm, values: dict[str, Any] | None = None) -> dict[str, Manifest]:
    docs = of_kind(helm.template(values), "NetworkPolicy")
    return {name.removeprefix("rg-resetgate-"): doc["spec"] for name, doc in docs.items()}


def egress_ports(spec: Manifest) -> set[int | str]:
    return {port["port"] for rule in spec["egress"] for port in rule["ports"]}


def test_every_pod_is_isolated_both_ways(helm: Helm) -> None:
    specs = policies(helm, {"sandbox.enabled": True})
    assert set(specs) == {*CORE, "sandbox"}
    for spec in specs.values():
        assert spec["policyTypes"] == ["Ingress", "Egress"]


def test_admission_accepts_8080_from_anywhere_and_metrics_from_prometheus_only(
    helm: Helm,
) -> None:
    assert policies(helm)["admission"]["ingress"] == [
        {"ports": HTTP},
        {"ports": METRICS, "from": [PROMETHEUS]},
    ]


def test_admission_sources_can_be_narrowed(helm: Helm) -> None:
    peer = {"ipBlock": {"cidr": "10.0.0.0/8"}}
    spec = policies(helm, {"networkPolicy.admissionFrom": [peer]})["admission"]
    assert spec["ingress"][0] == {"ports": HTTP, "from": [peer]}


def test_workers_accept_only_prometheus(helm: Helm) -> None:
    specs = policies(helm)
    for worker in ("sender", "poller", "router"):
        # one peer holding both selectors: Prometheus pods IN the monitoring namespace
        assert specs[worker]["ingress"] == [{"ports": METRICS, "from": [PROMETHEUS]}]


def test_the_monitoring_namespace_is_a_value(helm: Helm) -> None:
    """Issue 10.1: the metrics port, which tells admission results, is open to the
    monitoring namespace the values name, and to nothing else."""
    selector = {"matchLabels": {"kubernetes.io/metadata.name": "observability"}}
    specs = policies(helm, {"networkPolicy.prometheus.namespaceSelector": selector})
    for component in CORE:
        rules = [r for r in specs[component]["ingress"] if r["ports"] == METRICS]
        assert [rule["from"][0]["namespaceSelector"] for rule in rules] == [selector]


def test_egress_is_dns_redis_and_for_sender_and_poller_the_provider(helm: Helm) -> None:
    specs = policies(helm)
    for component in CORE:
        dns = specs[component]["egress"][0]
        assert dns["to"][0]["podSelector"] == {"matchLabels": {"k8s-app": "kube-dns"}}
        assert {(p["port"], p["protocol"]) for p in dns["ports"]} == {(53, "UDP"), (53, "TCP")}
    assert egress_ports(specs["admission"]) == {53, 6379}
    assert egress_ports(specs["router"]) == {53, 6379}
    assert egress_ports(specs["sender"]) == {53, 6379, 443}
    assert egress_ports(specs["poller"]) == {53, 6379, 443}


def test_with_the_sandbox_only_the_sender_and_poller_reach_it(helm: Helm) -> None:
    specs = policies(helm, {"sandbox.enabled": True, "provider.url": ""})
    to_sandbox = {
        "podSelector": {
            "matchLabels": {
                "app.kubernetes.io/name": "resetgate",
                "app.kubernetes.io/instance": "rg",
                "app.kubernetes.io/component": "sandbox",
            }
        }
    }
    for worker in ("sender", "poller"):
        assert {"to": [to_sandbox], "ports": HTTP} in specs[worker]["egress"]
    assert egress_ports(specs["sender"]) == {53, 6379, "http"}
    sandbox = specs["sandbox"]
    assert sandbox["egress"] == []
    senders = sandbox["ingress"][0]["from"][1]["podSelector"]["matchExpressions"]
    assert senders == [
        {"key": "app.kubernetes.io/component", "operator": "In", "values": ["sender", "poller"]}
    ]


def test_redis_and_provider_peers_come_from_values(helm: Helm) -> None:
    redis_peer = {"namespaceSelector": {"matchLabels": {"name": "data"}}}
    specs = policies(
        helm, {"networkPolicy.redis.to": [redis_peer], "networkPolicy.redis.ports": [6379, 26379]}
    )
    rule = specs["admission"]["egress"][1]
    assert rule["to"] == [redis_peer]
    assert [p["port"] for p in rule["ports"]] == [6379, 26379]


def test_network_policy_can_be_turned_off(helm: Helm) -> None:
    assert policies(helm, {"networkPolicy.enabled": False}) == {}
    assert name_of("admission") not in of_kind(
        helm.template({"networkPolicy.enabled": False}), "NetworkPolicy"
    )


def test_the_account_directory_is_reachable_from_those_that_look_accounts_up(helm: Helm) -> None:
    specs = policies(
        helm,
        {
            "config.directoryUrl": "https://accounts.internal",
            "networkPolicy.directory.ports": [8443],
        },
    )
    for component in ("admission", "sender", "router"):
        assert 8443 in egress_ports(specs[component]), component
    assert 8443 not in egress_ports(specs["poller"])
    assert 8443 not in egress_ports(policies(helm)["admission"])

"""What a platform team plugs in: Redis egress from the URL, an Ingress for the public
endpoint, LoadBalancer settings, extra volumes, priority, topology spread, PDB eviction of
unhealthy pods, and a termination grace period that fits the shutdown."""

from __future__ import annotations

from typing import Any

import pytest
from helmchart import (
    BASE,
    CORE,
    Helm,
    Manifest,
    config_data,
    container,
    deployments,
    name_of,
    of_kind,
)


def redis_egress_ports(helm: Helm, values: dict[str, Any]) -> dict[str, set[int]]:
    """Per component, the ports of the egress rule that is not DNS (the Redis one comes next)."""
    result = {}
    for name, doc in of_kind(helm.template(values), "NetworkPolicy").items():
        redis_rule = doc["spec"]["egress"][1]
        result[name.removeprefix("rg-resetgate-")] = {p["port"] for p in redis_rule["ports"]}
    return result


# --- networking ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "port"),
    [
        ({"redis.url": "rediss://redis.data.svc:6380/0"}, 6380),
        ({"redis.url": "redis://redis.data.svc/0"}, 6379),
        ({"redis.url": "", "redis.existingSecret": "redis-url"}, 6379),
        (
            {"redis.url": "rediss://redis.data.svc:6380/0", "networkPolicy.redis.ports": [7000]},
            7000,
        ),
    ],
)
def test_redis_egress_port_comes_from_the_url(
    helm: Helm, values: dict[str, Any], port: int
) -> None:
    ports = redis_egress_ports(helm, values)
    assert set(ports) == set(CORE)
    assert all(found == {port} for found in ports.values()), ports


def test_keda_dials_the_same_redis_port(helm: Helm) -> None:
    docs = helm.template({"redis.url": "rediss://redis.data.svc:6380/2", "keda.enabled": True})
    (scaled,) = of_kind(docs, "ScaledObject").values()
    trigger = scaled["spec"]["triggers"][0]["metadata"]
    assert trigger["address"] == "redis.data.svc:6380"
    assert trigger["enableTLS"] == "true"
    assert trigger["databaseIndex"] == "2"


INGRESS = {"ingress.enabled": True, "ingress.host": "reset.example.test"}


def only_ingress(helm: Helm, values: dict[str, Any]) -> Manifest:
    (ingress,) = of_kind(helm.template({**INGRESS, **values}), "Ingress").values()
    return ingress


def test_ingress_routes_only_the_public_endpoint(helm: Helm) -> None:
    ingress = only_ingress(helm, {"ingress.className": "nginx"})
    spec = ingress["spec"]
    assert spec["ingressClassName"] == "nginx"
    (rule,) = spec["rules"]
    assert rule["host"] == "reset.example.test"
    assert rule["http"]["paths"] == [
        {
            "path": "/v1/password-resets",
            "pathType": "Exact",
            "backend": {"service": {"name": name_of("admission"), "port": {"name": "http"}}},
        }
    ]
    assert "tls" not in spec


def test_ingress_tls_from_a_secret_or_from_cert_manager(helm: Helm) -> None:
    own = only_ingress(helm, {"ingress.tls.secretName": "reset-tls"})
    assert own["spec"]["tls"] == [{"hosts": ["reset.example.test"], "secretName": "reset-tls"}]
    assert "cert-manager.io/cluster-issuer" not in own["metadata"].get("annotations", {})
    issued = only_ingress(helm, {"ingress.tls.clusterIssuer": "letsencrypt"})
    assert issued["metadata"]["annotations"]["cert-manager.io/cluster-issuer"] == "letsencrypt"
    assert issued["spec"]["tls"] == [
        {"hosts": ["reset.example.test"], "secretName": "rg-resetgate-tls"}
    ]


def test_trusted_proxy_hops_follow_the_ingress(helm: Helm) -> None:
    assert "RESETGATE_TRUSTED_PROXY_HOPS" not in config_data(helm.template())
    assert config_data(helm.template(INGRESS))["RESETGATE_TRUSTED_PROXY_HOPS"] == "1"
    behind_lb = config_data(helm.template({**INGRESS, "ingress.proxyHops": 2}))
    assert behind_lb["RESETGATE_TRUSTED_PROXY_HOPS"] == "2"
    explicit = config_data(helm.template({**INGRESS, "config.trustedProxyHops": 0}))
    assert explicit["RESETGATE_TRUSTED_PROXY_HOPS"] == "0"


def test_ingress_needs_a_host(helm: Helm) -> None:
    error = helm.template_error({**BASE, "ingress.enabled": True})
    assert "ingress.enabled needs ingress.host" in error


def test_load_balancer_keeps_client_addresses_and_source_ranges(helm: Helm) -> None:
    values = {
        "admission.service.type": "LoadBalancer",
        "admission.service.externalTrafficPolicy": "Local",
        "admission.service.loadBalancerSourceRanges": ["203.0.113.0/24"],
    }
    service = of_kind(helm.template(values), "Service")[name_of("admission")]["spec"]
    assert service["externalTrafficPolicy"] == "Local"
    assert service["loadBalancerSourceRanges"] == ["203.0.113.0/24"]
    # meaningless (and refused by the API server) on a ClusterIP Service
    cluster_ip = {**values, "admission.service.type": "ClusterIP"}
    service = of_kind(helm.template(cluster_ip), "Service")[name_of("admission")]["spec"]
    assert "externalTrafficPolicy" not in service
    assert "loadBalancerSourceRanges" not in service


# --- extension points ----------------------------------------------------------------------


def pod_spec(deployment: Manifest) -> dict[str, Any]:
    return dict(deployment["spec"]["template"]["spec"])


def test_extra_volumes_and_priority_reach_every_pod(helm: Helm) -> None:
    volume = {"name": "redis-ca", "configMap": {"name": "redis-ca"}}
    mount = {"name": "redis-ca", "mountPath": "/etc/redis-ca", "readOnly": True}
    docs = helm.template(
        {
            "extraVolumes": [volume],
            "extraVolumeMounts": [mount],
            "priorityClassName": "resetgate-critical",
            "sandbox.enabled": True,
        }
    )
    for component, deployment in deployments(docs).items():
        spec = pod_spec(deployment)
        assert spec["volumes"][1:] == [volume], component
        assert spec["containers"][0]["volumeMounts"][1:] == [mount], component
        assert spec["priorityClassName"] == "resetgate-critical", component
    assert "priorityClassName" not in pod_spec(deployments(helm.template())["sender"])


def test_admission_and_sender_spread_softly_by_default(helm: Helm) -> None:
    docs = deployments(helm.template())
    for component in ("admission", "sender"):
        constraints = pod_spec(docs[component])["topologySpreadConstraints"]
        assert [c["topologyKey"] for c in constraints] == [
            "topology.kubernetes.io/zone",
            "kubernetes.io/hostname",
        ]
        for constraint in constraints:
            assert constraint["whenUnsatisfiable"] == "ScheduleAnyway"
            labels = constraint["labelSelector"]["matchLabels"]
            assert labels["app.kubernetes.io/component"] == component
            assert labels["app.kubernetes.io/instance"] == "rg"
    for component in ("poller", "router"):
        assert "topologySpreadConstraints" not in pod_spec(docs[component])
    own = [
        {
            "maxSkew": 2,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
        }
    ]
    custom = deployments(helm.template({"sender.topologySpreadConstraints": own}))
    assert pod_spec(custom["sender"])["topologySpreadConstraints"] == own


def test_pdbs_let_unhealthy_pods_be_evicted_where_the_api_knows_how(helm: Helm) -> None:
    for version, expected in (("1.33.0", "AlwaysAllow"), ("1.25.0", None)):
        pdbs = of_kind(helm.template(extra=["--kube-version", version]), "PodDisruptionBudget")
        assert set(pdbs) == {name_of(c) for c in CORE}
        for pdb in pdbs.values():
            assert pdb["spec"].get("unhealthyPodEvictionPolicy") == expected, version


def test_the_shutdown_fits_the_termination_grace_period(helm: Helm) -> None:
    # admission: 5 s preStop + 20 s shutdown grace = 25 s
    assert config_data(helm.template())["RESETGATE_SHUTDOWN_GRACE_SECONDS"] == "20"
    helm.template({"terminationGracePeriodSeconds": 26})
    error = " ".join(helm.template_error({**BASE, "terminationGracePeriodSeconds": 25}).split())
    assert "admission needs 5 s preStop sleep + 20 s shutdownGraceSeconds = 25 s" in error
    assert "sender" not in error  # no preStop: 20 s fits in 25
    error = " ".join(
        helm.template_error(
            {**BASE, "shutdownGraceSeconds": 40, "terminationGracePeriodSeconds": 30}
        ).split()
    )
    for component in CORE:
        assert f"{component} needs" in error
    short = config_data(
        helm.template({"shutdownGraceSeconds": 10, "terminationGracePeriodSeconds": 21})
    )
    assert short["RESETGATE_SHUTDOWN_GRACE_SECONDS"] == "10"


# --- Redis guidance --------------------------------------------------------------------------


def test_the_dev_redis_never_evicts_and_the_rules_ticket_one_that_does(helm: Helm) -> None:
    docs = helm.template({"redis.url": "", "devRedis.enabled": True})
    args = container(deployments(docs)["redis"])["args"]
    assert args[args.index("--maxmemory-policy") + 1] == "noeviction"
    monitoring = {
        "metrics.prometheusRule.enabled": True,
        "metrics.runbookBaseUrl": "https://x.test/rb",
    }
    (rule,) = of_kind(helm.template(monitoring), "PrometheusRule").values()
    (unsafe,) = [
        r
        for g in rule["spec"]["groups"]
        for r in g["rules"]
        if r.get("alert") == "RedisEvictionPolicyUnsafe"
    ]
    assert "resetgate_redis_maxmemory_policy" in unsafe["expr"]
    assert unsafe["labels"]["severity"] == "ticket"


def test_helm_lint_strict_passes_with_every_platform_value(helm: Helm) -> None:
    values = {
        **BASE,
        "redis.url": "rediss://redis.data.svc:6380/0",
        "metrics.serviceMonitor.enabled": True,
        "metrics.prometheusRule.enabled": True,
        "metrics.dashboard.enabled": True,
        "metrics.runbookBaseUrl": "https://git.example.test/resetgate/blob/main/docs/runbook.md",
        "ingress.enabled": True,
        "ingress.host": "reset.example.test",
        "ingress.tls.clusterIssuer": "letsencrypt",
        "admission.service.type": "LoadBalancer",
        "admission.service.externalTrafficPolicy": "Local",
        "priorityClassName": "resetgate-critical",
        "extraVolumes": [{"name": "ca", "configMap": {"name": "ca"}}],
        "extraVolumeMounts": [{"name": "ca", "mountPath": "/etc/ca"}],
    }
    done = helm.lint(values)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Fail:" not in done.stdout + done.stderr

"""Every rendered object is valid Kubernetes, for the default values and each variation.

Core objects go through kubernetes-validate --strict (unknown fields rejected) against the
chart's kubeVersion floor and the newest schemas it ships. Custom resources
(ServiceMonitor, PrometheusRule, ScaledObject) have no schema there: they are named
here, skipped by kubernetes-validate on purpose, and their shape is checked by hand.
"""

from __future__ import annotations

import functools
from typing import Any

import kubernetes_validate
import kubernetes_validate.utils
import pytest
from helmchart import CHART, CORE, Helm, Manifest, container, deployments, of_kind

RUNBOOK_BASE = "https://git.example.test/team/resetgate/blob/main/docs/runbook.md"
# kubernetes-validate reads and parses its multi-megabyte _definitions.json again for every
# object it checks; the schema files never change, so each is read once per test process.
kubernetes_validate.utils.schema_contents = functools.lru_cache(maxsize=None)(
    kubernetes_validate.utils.schema_contents
)
KUBE_VERSIONS = ("1.25.0", kubernetes_validate.latest_version())
CUSTOM_KINDS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
    ("keda.sh/v1alpha1", "ScaledObject"),
}

VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "sandbox": {"sandbox.enabled": True, "provider.url": ""},
    "secret-from-values": {
        "secrets.existingSecret": "",
        "secrets.providerApiKey": "pk",
        "secrets.tokenKeys": "k1:0123456789abcdef0123",
        "secrets.internalApiToken": "it",
    },
    "monitoring": {
        "metrics.serviceMonitor.enabled": True,
        "metrics.prometheusRule.enabled": True,
        "metrics.dashboard.enabled": True,
        "metrics.runbookBaseUrl": RUNBOOK_BASE,
    },
    # the poller has no autoscaler: only its lease holder works
    "hpa": {f"{c}.autoscaling.enabled": True for c in CORE if c != "poller"},
    "ingress": {
        "ingress.enabled": True,
        "ingress.host": "reset.example.test",
        "ingress.tls.clusterIssuer": "letsencrypt",
        "ingress.className": "nginx",
    },
    "platform": {
        "redis.url": "rediss://redis.data.svc:6380/0",
        "priorityClassName": "resetgate-critical",
        "extraVolumes": [{"name": "redis-ca", "configMap": {"name": "redis-ca"}}],
        "extraVolumeMounts": [{"name": "redis-ca", "mountPath": "/etc/redis-ca", "readOnly": True}],
        "admission.service.type": "LoadBalancer",
        "admission.service.externalTrafficPolicy": "Local",
        "admission.service.loadBalancerSourceRanges": ["203.0.113.0/24"],
    },
    "keda": {"keda.enabled": True},
    "keda-cluster": {"keda.enabled": True, "redis.cluster": True, "keda.combine": "max"},
    "redis-cluster": {"redis.cluster": True},
    "redis-secret": {"redis.url": "", "redis.existingSecret": "redis-url"},
    "network-policy-off": {"networkPolicy.enabled": False},
    "wait-replicas": {"durability.waitReplicas": 2, "durability.waitTimeoutMs": 250},
    "dev-redis": {"redis.url": "", "devRedis.enabled": True, "keda.enabled": True},
    "archive": {"archive.enabled": True, "archive.dsn.existingSecret": "archive-db"},
    "archive-dsn-value": {
        "archive.enabled": True,
        "archive.dsn.value": "postgresql://archiver:pw@pg.data.svc:5432/resetgate",
        "serviceAccount.create": False,
        "serviceAccount.name": "resetgate",
    },
    "everything": {
        "sandbox.enabled": True,
        "metrics.serviceMonitor.enabled": True,
        "metrics.prometheusRule.enabled": True,
        "metrics.dashboard.enabled": True,
        "metrics.runbookBaseUrl": RUNBOOK_BASE,
        "ingress.enabled": True,
        "ingress.host": "reset.example.test",
        "ingress.tls.secretName": "reset-tls",
        "keda.enabled": True,
        "admission.autoscaling.enabled": True,
        "commonLabels": {"team": "accounts"},
        "commonAnnotations": {"owner": "accounts"},
        "image.digest": "sha256:" + "a" * 64,
    },
}


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def variant(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def rendered(variant: str, helm: Helm) -> list[Manifest]:
    return helm.template(VARIANTS[variant])


def check_custom(doc: Manifest) -> None:
    spec = doc["spec"]
    if doc["kind"] == "ServiceMonitor":
        assert spec["selector"]["matchLabels"]
        assert all(e["port"] == "metrics" and e["path"] == "/metrics" for e in spec["endpoints"])
    elif doc["kind"] == "PrometheusRule":
        for group in spec["groups"]:
            assert group["name"] and group["rules"]
            assert all(("alert" in r) != ("record" in r) and r["expr"] for r in group["rules"])
    else:
        assert spec["scaleTargetRef"]["name"] and spec["triggers"]
        assert 1 <= spec["minReplicaCount"] <= spec["maxReplicaCount"]
        for trigger in spec["triggers"]:
            assert all(isinstance(v, str) for v in trigger["metadata"].values())


def test_every_manifest_is_valid_kubernetes(variant: str, helm: Helm) -> None:
    # Rendered for each version as helm would against that API server: fields newer than the
    # floor (unhealthyPodEvictionPolicy) appear only where the server knows them.
    failures = []
    for version in KUBE_VERSIONS:
        for doc in helm.template(VARIANTS[variant], extra=["--kube-version", version]):
            if (doc["apiVersion"], doc["kind"]) in CUSTOM_KINDS:
                check_custom(doc)
                continue
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as error:
                where = "/".join(map(str, error.path))
                failures.append(
                    f"{doc['kind']}/{doc['metadata']['name']} @{version} {where}: {error.message}"
                )
    assert not failures, "\n".join(failures)


def test_every_manifest_is_namespaced_and_labelled(rendered: list[Manifest]) -> None:
    for doc in rendered:
        meta = doc["metadata"]
        assert meta["namespace"] == "default"
        assert meta["labels"]["app.kubernetes.io/instance"] == "rg"
        assert meta["labels"]["app.kubernetes.io/part-of"] == "resetgate"


def test_pods_are_locked_down(rendered: list[Manifest]) -> None:
    for component, deployment in deployments(rendered).items():
        pod = deployment["spec"]["template"]["spec"]
        box = container(deployment)["securityContext"]
        assert pod["automountServiceAccountToken"] is False, component
        assert pod["securityContext"]["runAsNonRoot"] is True, component
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, component
        assert box["readOnlyRootFilesystem"] is True, component
        assert box["allowPrivilegeEscalation"] is False, component
        assert box["capabilities"]["drop"] == ["ALL"], component


def test_gateway_pods_run_one_image_as_uid_10001(rendered: list[Manifest]) -> None:
    gateway = {c: d for c, d in deployments(rendered).items() if c != "redis"}
    images = {container(d)["image"] for d in gateway.values()}
    assert len(images) == 1
    for component, deployment in gateway.items():
        pod = deployment["spec"]["template"]["spec"]
        assert container(deployment)["command"] == ["python", "-m", f"services.{component}"]
        assert pod["securityContext"]["runAsUser"] == 10001
        # The services give in-flight work 20 s after SIGTERM; Kubernetes must wait longer.
        assert pod["terminationGracePeriodSeconds"] == 30
        mounts = {m["mountPath"]: m["name"] for m in container(deployment)["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert "emptyDir" in volumes[mounts["/tmp"]]


def test_probes_hit_the_operational_listener_and_a_startup_probe_guards_liveness(
    rendered: list[Manifest],
) -> None:
    """Core pods are probed on the metrics port (up from process start, issue 16.3), never on
    the API's; only admission (and the sandbox) open http."""
    http = {"name": "http", "containerPort": 8080, "protocol": "TCP"}
    metrics = {"name": "metrics", "containerPort": 8081, "protocol": "TCP"}
    expected_ports = {"admission": [http, metrics], "sandbox": [http]}
    for component, deployment in deployments(rendered).items():
        if component == "redis":
            continue
        box = container(deployment)
        assert box["ports"] == expected_ports.get(component, [metrics])
        port = "http" if component == "sandbox" else "metrics"
        assert box["startupProbe"]["httpGet"] == {"path": "/healthz", "port": port}
        assert box["startupProbe"]["periodSeconds"] * box["startupProbe"]["failureThreshold"] >= 30
        assert box["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port}
        assert box["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port}
        assert box["resources"]["requests"] and box["resources"]["limits"]


def test_each_core_component_has_a_service_and_a_disruption_budget(
    rendered: list[Manifest],
) -> None:
    services = {
        d["metadata"]["labels"]["app.kubernetes.io/component"]: d
        for d in of_kind(rendered, "Service").values()
    }
    budgets = {
        d["metadata"]["labels"]["app.kubernetes.io/component"]: d
        for d in of_kind(rendered, "PodDisruptionBudget").values()
    }
    for component in CORE:
        assert services[component]["spec"]["ports"][-1]["targetPort"] == "metrics"
        assert budgets[component]["spec"]["maxUnavailable"] == 1


def test_names_are_cut_at_63_characters_and_stay_distinct(helm: Helm) -> None:
    docs = helm.template({"fullnameOverride": "x" * 70, "sandbox.enabled": True})
    for kind in {doc["kind"] for doc in docs}:
        names = [doc["metadata"]["name"] for doc in docs if doc["kind"] == kind]
        assert len(names) == len(set(names)), kind
        assert all(len(name) <= 63 and not name.endswith("-") for name in names), names
    for component, deployment in deployments(docs).items():
        assert deployment["metadata"]["name"].endswith(f"-{component}")


def test_the_chart_renders_at_its_kube_version_floor(helm: Helm) -> None:
    floor = "1.25.0"
    assert f'kubeVersion: ">={floor}-0"' in (CHART / "Chart.yaml").read_text()
    docs = helm.template({}, extra=["--kube-version", floor])
    assert deployments(docs).keys() == set(CORE)

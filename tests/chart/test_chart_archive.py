"""The evidence archive in the chart (docs/archive.md): off by default (no archiver, no
Secret, no hook, nothing archive-related in any pod); on, an archiver Deployment like the
other services, the DSN from a Secret only (never a literal env value or the ConfigMap), the
migration as a pre-install/pre-upgrade hook Job, PostgreSQL egress for the pods that reach
it, and a refusal that says what to set when no DSN source is given. Every object is checked
against the Kubernetes schemas by test_chart_manifests (its "archive" variants)."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
from helmchart import (
    BASE,
    CHART,
    CORE,
    Helm,
    Manifest,
    config_data,
    container,
    deployments,
    env,
    of_kind,
)

DSN = "postgresql://archiver:s3cret@pg.data.svc:5432/resetgate"
FROM_VALUE: dict[str, Any] = {"archive.enabled": True, "archive.dsn.value": DSN}
FROM_SECRET: dict[str, Any] = {
    "archive.enabled": True,
    "archive.dsn.existingSecret": "archive-db",
    "archive.dsn.existingSecretKey": "url",
}
HOOK = "pre-install,pre-upgrade"


def jobs(docs: list[Manifest]) -> dict[str, Manifest]:
    return of_kind(docs, "Job")


def test_archive_is_off_by_default(helm: Helm) -> None:
    docs = helm.template()
    assert set(deployments(docs)) == set(CORE)
    assert not jobs(docs)
    assert not of_kind(docs, "Secret")
    assert not any(key.startswith("RESETGATE_ARCHIVE") for key in config_data(docs))
    for component, deployment in deployments(docs).items():
        assert not any(name.startswith("RESETGATE_ARCHIVE") for name in env(deployment)), component


def test_the_archiver_runs_like_the_other_services(helm: Helm) -> None:
    docs = helm.template(FROM_SECRET)
    found = deployments(docs)
    assert set(found) == {*CORE, "archiver"}
    archiver, poller = found["archiver"], found["poller"]
    assert container(archiver)["command"] == ["python", "-m", "services.archiver"]
    # The same locked-down pod and container as the poller's, the same probes on metrics.
    for key in ("securityContext", "automountServiceAccountToken", "enableServiceLinks"):
        assert archiver["spec"]["template"]["spec"][key] == poller["spec"]["template"]["spec"][key]
    for key in ("securityContext", "ports", "livenessProbe", "readinessProbe", "envFrom"):
        assert container(archiver)[key] == container(poller)[key], key
    # Scraped like the others: a Service with the metrics port, in the ServiceMonitor.
    services = {
        d["metadata"]["labels"]["app.kubernetes.io/component"]: d
        for d in of_kind(docs, "Service").values()
    }
    assert [p["name"] for p in services["archiver"]["spec"]["ports"]] == ["metrics"]
    monitored = helm.template({**FROM_SECRET, "metrics.serviceMonitor.enabled": True})
    (monitor,) = of_kind(monitored, "ServiceMonitor").values()
    (match,) = monitor["spec"]["selector"]["matchExpressions"]
    assert set(match["values"]) == {*CORE, "archiver"}


@pytest.mark.parametrize(
    ("values", "secret", "key"),
    [(FROM_SECRET, "archive-db", "url"), (FROM_VALUE, "rg-resetgate-archive", "dsn")],
    ids=["existing-secret", "secret-from-value"],
)
def test_the_dsn_reaches_only_its_readers_and_only_from_a_secret(
    helm: Helm, values: dict[str, Any], secret: str, key: str
) -> None:
    docs = helm.template(values)
    reference = {"secretKeyRef": {"name": secret, "key": key}}
    readers = {
        **{c: d for c, d in deployments(docs).items() if c in ("admission", "archiver")},
        "migrate": next(iter(jobs(docs).values())),
    }
    for name, workload in readers.items():
        assert env(workload)["RESETGATE_ARCHIVE_DSN"] == reference, name
    for component in ("sender", "poller", "router"):
        assert "RESETGATE_ARCHIVE_DSN" not in env(deployments(docs)[component]), component
    # The URL (it carries a password) is in no ConfigMap and no literal env value.
    assert "RESETGATE_ARCHIVE_DSN" not in config_data(docs)
    text = repr([d for d in docs if d["kind"] != "Secret"])
    assert DSN not in text


def test_every_service_keeps_finished_operations_for_the_archive(helm: Helm) -> None:
    data = config_data(helm.template(FROM_SECRET))
    # Every service reads the ConfigMap (envFrom), so every one of them is told.
    assert data["RESETGATE_ARCHIVE_ENABLED"] == "true"
    assert data["RESETGATE_ARCHIVE_RETENTION_DAYS"] == "400"


def test_the_chart_makes_the_dsn_secret_before_the_migration_needs_it(helm: Helm) -> None:
    docs = helm.template(FROM_VALUE)
    (secret,) = of_kind(docs, "Secret").values()
    assert secret["metadata"]["name"] == "rg-resetgate-archive"
    notes = secret["metadata"]["annotations"]
    assert notes["helm.sh/hook"] == HOOK
    (job,) = jobs(docs).values()
    job_weight = int(job["metadata"]["annotations"]["helm.sh/hook-weight"])
    assert int(notes["helm.sh/hook-weight"]) < job_weight
    # An existing Secret is the operator's: the chart makes none.
    assert not of_kind(helm.template(FROM_SECRET), "Secret")


def test_the_migration_runs_as_a_hook_job(helm: Helm) -> None:
    (job,) = jobs(helm.template(FROM_SECRET)).values()
    notes = job["metadata"]["annotations"]
    assert notes["helm.sh/hook"] == HOOK
    assert notes["helm.sh/hook-delete-policy"] == "before-hook-creation,hook-succeeded"
    pod = job["spec"]["template"]["spec"]
    box = container(job)
    assert box["command"] == ["python", "-m", "services.ctl.main", "archive", "migrate"]
    assert pod["restartPolicy"] == "Never" and job["spec"]["backoffLimit"] == 2
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert box["securityContext"]["readOnlyRootFilesystem"] is True
    assert box["securityContext"]["capabilities"]["drop"] == ["ALL"]
    # A ServiceAccount the chart creates does not exist yet when a pre-install hook runs.
    assert "serviceAccountName" not in pod
    kubernetes_validate.validate(job, kubernetes_validate.latest_version(), strict=True)


def test_postgres_egress_is_open_to_its_readers_only(helm: Helm) -> None:
    policies = {
        d["metadata"]["labels"]["app.kubernetes.io/component"]: d["spec"]
        for d in of_kind(helm.template(FROM_SECRET), "NetworkPolicy").values()
    }
    ports = {c: {p["port"] for r in s["egress"] for p in r["ports"]} for c, s in policies.items()}
    assert set(policies) == {*CORE, "archiver"}
    assert 5432 in ports["admission"] and 5432 in ports["archiver"]
    assert all(5432 not in ports[c] for c in ("sender", "poller", "router"))
    # Off: no rule for PostgreSQL anywhere.
    off = of_kind(helm.template(), "NetworkPolicy").values()
    assert all(p["port"] != 5432 for d in off for r in d["spec"]["egress"] for p in r["ports"])


REFUSED: dict[str, tuple[dict[str, Any], str]] = {
    "no-dsn": (
        {"archive.enabled": True},
        "archive.enabled needs the archive's PostgreSQL URL. Set archive.dsn.existingSecret",
    ),
    "two-sources": (
        {**FROM_SECRET, "archive.dsn.value": DSN},
        "archive.dsn.existingSecret and archive.dsn.value are both set",
    ),
    "not-a-url": (
        {"archive.enabled": True, "archive.dsn.value": "pg.data.svc:5432"},
        "must be a libpq URL starting with postgresql://",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_the_archive_without_a_usable_dsn_is_refused_clearly(helm: Helm, case: str) -> None:
    values, message = REFUSED[case]
    flat = " ".join(helm.template_error({**BASE, **values}).split())
    assert "VALUES VALIDATION:" in flat and message in flat


def test_the_archive_example_turns_it_on_over_a_providers_example(helm: Helm) -> None:
    examples = CHART / "examples"
    docs = helm.template(values_files=[examples / "postmark.yaml", examples / "archive.yaml"])
    assert deployments(docs)["archiver"]["spec"]["replicas"] == 2
    assert env(deployments(docs)["archiver"])["RESETGATE_ARCHIVE_DSN"] == {
        "secretKeyRef": {"name": "resetgate-archive", "key": "archive-dsn"}
    }
    assert len(jobs(docs)) == 1
    linted = helm.lint({}, [examples / "postmark.yaml", examples / "archive.yaml"])
    assert linted.returncode == 0, linted.stdout + linted.stderr

"""The chart as a platform team installs it: `make chart-package` builds a versioned artifact
whose version is the project's (the image's); rendered from that artifact with the example
values of each provider kind, as docs/kubernetes.md's install step says, it gives a
deployment speaking that provider and a PrometheusRule, every core object valid against the
Kubernetes schemas (kubernetes-validate, strict) and the PrometheusRule and ServiceMonitor
against the Prometheus Operator's CRD schemas (tools/install-crd-models.sh)."""

from __future__ import annotations

import functools
import json
import re
import subprocess
import tarfile
import tomllib
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from helmchart import CHART, REPO, Helm, Manifest, deployments, env, of_kind
from test_chart_manifests import CUSTOM_KINDS, check_custom

KINDS = ("sendgrid", "postmark", "mailgun", "ses")
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
KUBE_VERSION = kubernetes_validate.latest_version()


@pytest.fixture(scope="module")
def packaged(tmp_path_factory: pytest.TempPathFactory, helm: Helm) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        ["make", "-s", "chart-package", f"CHART_DIST={dist}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return dist / f"resetgate-{VERSION}.tgz"


def test_the_package_carries_the_projects_version_as_chart_and_app_version(
    packaged: Path,
) -> None:
    with tarfile.open(packaged) as archive:
        chart = yaml.safe_load(archive.extractfile("resetgate/Chart.yaml").read())  # type: ignore[union-attr]
        names = archive.getnames()
    assert chart["version"] == chart["appVersion"] == VERSION
    assert {f"resetgate/examples/{kind}.yaml" for kind in KINDS} <= set(names)
    # The unpackaged chart and the image agree with the one source too.
    source = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert source["version"] == source["appVersion"] == VERSION
    assert f"ARG VERSION={VERSION}\n" in (REPO / "Dockerfile").read_text()


@functools.cache
def crd_models() -> Path:
    """tools/install-crd-models.sh: the Prometheus Operator's CRD schemas, offline after once."""
    done = subprocess.run(
        ["bash", str(REPO / "tools" / "install-crd-models.sh")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"cannot get the CRD schemas: {done.stderr}"
    return Path(done.stdout.strip().splitlines()[-1])


def crd_failures(docs: list[Manifest], tmp: Path) -> list[str]:
    """The custom resources checked against their CRD's schema (tools/validate-crd.mjs)."""
    paths = []
    for i, doc in enumerate(docs):
        paths.append(tmp / f"{i}.json")
        paths[-1].write_text(json.dumps(doc))
    models = crd_models()
    command = ["node", str(models / "validate-crd.mjs"), *map(str, paths)]
    done = subprocess.run(
        command, cwd=models, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode in (0, 1), done.stderr
    return done.stdout.splitlines()


def render(helm: Helm, packaged: Path, kind: str) -> list[Manifest]:
    values = CHART / "examples" / f"{kind}.yaml"
    done = helm.run(
        "template",
        "resetgate",
        str(packaged),
        "-n",
        "resetgate",
        "-f",
        str(values),
        "--kube-version",
        KUBE_VERSION,
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@pytest.mark.parametrize("kind", KINDS)
def test_each_kinds_example_renders_that_provider_and_its_alerts_valid(
    helm: Helm, packaged: Path, kind: str, tmp_path: Path
) -> None:
    docs = render(helm, packaged, kind)
    settings = {
        **of_kind(docs, "ConfigMap")["resetgate"]["data"],
        **env(deployments(docs)["sender"]),
    }
    assert settings["RESETGATE_PROVIDER_KIND"] == kind
    assert "provider.example" not in yaml.safe_dump(docs), "no placeholder provider URL"
    (rule,) = of_kind(docs, "PrometheusRule").values()
    alerts = {r.get("alert") for group in rule["spec"]["groups"] for r in group["rules"]}
    assert "OldestEligibleAgeHigh" in alerts
    failures = crd_failures(
        [d for d in docs if (d["apiVersion"], d["kind"]) in CUSTOM_KINDS], tmp_path
    )
    for doc in docs:
        if (doc["apiVersion"], doc["kind"]) in CUSTOM_KINDS:
            check_custom(doc)
            continue
        try:
            kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            failures.append(f"{doc['kind']}/{doc['metadata']['name']}: {error.message}")
    assert not failures, "\n".join(failures)


def test_the_documented_install_step_gives_every_value_a_real_install_needs() -> None:
    """It rendered a deployment talking to https://api.provider.example and no alerts."""
    text = (REPO / "docs" / "kubernetes.md").read_text()
    step = text[text.index("2. Install.") : text.index("3. Put admission")]
    for needed in (
        "provider.kind",
        "metrics.prometheusRule.enabled",
        "metrics.runbookBaseUrl",
        "make chart-package",
        "examples/",
    ):
        assert needed in step, needed
    assert not re.search(r"api\.provider\.example", step)

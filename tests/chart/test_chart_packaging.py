"""skaffold.yaml points at things that exist and agrees with the chart (the Dockerfile is
checked in tests/image)."""

from __future__ import annotations

import re
from typing import Any

import yaml
from helmchart import CHART, REPO, Helm, container, deployments

SKAFFOLD = yaml.safe_load((REPO / "skaffold.yaml").read_text())


def releases(config: dict[str, Any]) -> list[dict[str, Any]]:
    return list(config["deploy"]["helm"]["releases"])


def profile_values_files() -> list[str]:
    return [
        patch["value"]
        for profile in SKAFFOLD["profiles"]
        for patch in profile.get("patches", [])
        if patch["path"].endswith("valuesFiles/0")
    ]


def test_skaffold_names_paths_that_exist() -> None:
    for artifact in SKAFFOLD["build"]["artifacts"]:
        context = REPO / artifact.get("context", ".")
        assert (context / artifact["docker"]["dockerfile"]).is_file()
    for release in releases(SKAFFOLD):
        assert (REPO / release["chartPath"] / "Chart.yaml").is_file()
        for values in release["valuesFiles"]:
            assert (REPO / values).is_file(), values
    for values in profile_values_files():
        assert (REPO / values).is_file(), values


def test_skaffold_profiles_are_dev_and_prod_like() -> None:
    assert [p["name"] for p in SKAFFOLD["profiles"]] == ["dev", "prod-like"]
    assert profile_values_files() == ["charts/resetgate/values-prod-like.yaml"]
    assert SKAFFOLD["build"]["platforms"] == ["linux/amd64", "linux/arm64"]
    # every profile has a comment saying when to use it
    text = (REPO / "skaffold.yaml").read_text()
    for name in ("dev", "prod-like"):
        assert re.search(rf"#\s*{name}: .+\n(\s*#.*\n)*\s*- name: {name}\n", text), name


def test_skaffold_sets_the_image_it_built(helm: Helm) -> None:
    (artifact,) = SKAFFOLD["build"]["artifacts"]
    image = artifact["image"]
    templates = releases(SKAFFOLD)[0]["setValueTemplates"]
    assert templates == {
        "image.repository": f"{{{{.IMAGE_REPO_{image}}}}}",
        "image.tag": f"{{{{.IMAGE_TAG_{image}}}}}",
    }
    # what skaffold would pass, for each profile's values file
    for values_file in [*releases(SKAFFOLD)[0]["valuesFiles"], *profile_values_files()]:
        docs = helm.template(
            {"image.repository": "registry.test/resetgate", "image.tag": "abc123"},
            values_files=[REPO / values_file],
        )
        images = {
            d["spec"]["template"]["spec"]["containers"][0]["image"]
            for c, d in deployments(docs).items()
            if c != "redis"
        }
        assert images == {"registry.test/resetgate:abc123"}


def test_prod_like_deploys_the_pushed_image_by_tag_and_digest(helm: Helm) -> None:
    (prod,) = [p for p in SKAFFOLD["profiles"] if p["name"] == "prod-like"]
    (digest,) = [p for p in prod["patches"] if p["path"].endswith("setValueTemplates/image.digest")]
    assert digest == {
        "op": "add",
        "path": "/deploy/helm/releases/0/setValueTemplates/image.digest",
        "value": "{{.IMAGE_DIGEST_resetgate}}",
    }
    pinned = "sha256:" + "b" * 64
    docs = helm.template(
        {
            "image.repository": "registry.test/resetgate",
            "image.tag": "abc123",
            "image.digest": pinned,
        },
        values_files=[CHART / "values-prod-like.yaml"],
    )
    images = {container(d)["image"] for c, d in deployments(docs).items()}
    assert images == {f"registry.test/resetgate:abc123@{pinned}"}


def test_dev_profile_forwards_the_admission_service(helm: Helm) -> None:
    (dev,) = [p for p in SKAFFOLD["profiles"] if p["name"] == "dev"]
    (forward,) = dev["portForward"]
    release = releases(SKAFFOLD)[0]
    docs = helm.template(
        values_files=[REPO / release["valuesFiles"][0]], extra=["--namespace", release["namespace"]]
    )
    # skaffold installs the release under its own name, so names use that prefix
    admission = deployments(docs)["admission"]["metadata"]["name"]
    assert forward["resourceName"] == admission.replace("rg-resetgate", release["name"])


def test_chart_app_version_matches_the_project_version() -> None:
    project = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M)
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert project and chart["appVersion"] == project.group(1)

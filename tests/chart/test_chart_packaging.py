"""skaffold.yaml and the Dockerfile point at things that exist and agree with the chart.

There is no container engine on the development machines, so the Dockerfile is checked
statically: its stages, its user, and that every path it copies is in the build context.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import Any

import yaml
from helmchart import CHART, REPO, Helm, deployments

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


# --- Dockerfile ---------------------------------------------------------------------------

DOCKERFILE = (REPO / "Dockerfile").read_text()


def instructions(text: str) -> list[tuple[str, str]]:
    joined = re.sub(r"\\\n", " ", text)
    result = []
    for line in (raw.strip() for raw in joined.splitlines()):
        if line and not line.startswith("#"):
            op, _, arg = line.partition(" ")
            result.append((op, arg.strip()))
    return result


def stages() -> list[list[tuple[str, str]]]:
    result: list[list[tuple[str, str]]] = []
    for op, arg in instructions(DOCKERFILE):
        if op == "FROM":
            result.append([])
        if result:
            result[-1].append((op, arg))
    return result


def test_dockerfile_is_multi_stage_on_python_311_slim() -> None:
    assert "ARG PYTHON_IMAGE=python:3.11-slim" in DOCKERFILE
    froms = [arg for op, arg in instructions(DOCKERFILE) if op == "FROM"]
    assert froms == ["${PYTHON_IMAGE} AS builder", "${PYTHON_IMAGE} AS runtime"]


def test_runtime_stage_is_non_root_without_build_tools() -> None:
    runtime = stages()[-1]
    users = [arg for op, arg in runtime if op == "USER"]
    assert users == ["10001:10001"]
    text = " ".join(arg for _, arg in runtime)
    assert "PYTHONDONTWRITEBYTECODE=1" in text
    assert "COPY --from=builder /opt/venv /opt/venv" in " ".join(f"{o} {a}" for o, a in runtime)
    for tool in ("apt-get install", "gcc", "build-essential", "pip install"):
        assert tool not in text, tool
    assert runtime[-1][0] == "CMD" and "services." in runtime[-1][1]


def ignored(path: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatch(path, p) or path.startswith(p.rstrip("/") + "/") for p in patterns)


def test_every_copied_path_is_in_the_build_context() -> None:
    patterns = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    sources: list[str] = []
    for op, arg in instructions(DOCKERFILE):
        if op == "COPY" and not arg.startswith("--from"):
            sources += arg.split()[:-1]
    assert sources
    for source in sources:
        path = source.rstrip("/")
        assert Path(REPO / path).exists(), source
        assert not ignored(path, patterns), f"{source} is excluded by .dockerignore"


def test_chart_app_version_matches_the_project_version() -> None:
    project = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M)
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert project and chart["appVersion"] == project.group(1)

"""Render charts/resetgate with a real helm binary and pick the rendered objects apart.

helm comes from tools/install-helm.sh, which reuses a helm 3 on PATH or installs the pinned
one into .tools/; if that fails the tests fail (no skip), because an unrendered chart is an
untested chart.
"""

from __future__ import annotations

import functools
import json
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "resetgate"
INSTALL_HELM = REPO / "tools" / "install-helm.sh"
RELEASE = "rg"
CORE = ("admission", "sender", "poller", "router")

# The least a release needs (a Secret, a Redis, a provider): the chart's defaults plus
# these are "the default values" of these tests.
BASE: dict[str, Any] = {
    "secrets.existingSecret": "resetgate-secrets",
    "redis.url": "redis://redis.data.svc:6379/0",
    "provider.url": "https://email.example.test",
    "config.resetUrlBase": "https://game.example.test/reset",
    "config.emailFrom": "no-reply@game.example.test",
}

Manifest = dict[str, Any]
# libyaml's parser where PyYAML has it: the pure-Python one spent seconds on each render.
SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def install_helm() -> str:
    """Path of a helm 3 binary, installing it if needed; raises with the installer's words."""
    done = subprocess.run(
        ["bash", str(INSTALL_HELM)], capture_output=True, text=True, timeout=300, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"tools/install-helm.sh failed:\n{done.stderr}{done.stdout}")
    return done.stdout.strip().splitlines()[-1]


def set_args(values: Mapping[str, Any]) -> list[str]:
    # --set-json keeps types exact: "true" stays a string, 3 stays an int.
    args: list[str] = []
    for key, value in values.items():
        args += ["--set-json", f"{key}={json.dumps(value)}"]
    return args


@dataclass(frozen=True)
class Helm:
    binary: str

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.binary, *args], capture_output=True, text=True, timeout=120, check=False
        )

    def template_args(
        self, values: Mapping[str, Any], values_files: Iterable[Path], extra: Iterable[str]
    ) -> list[str]:
        files = [arg for path in values_files for arg in ("-f", str(path))]
        return ["template", RELEASE, str(CHART), *files, *set_args(values), *extra]

    def template(
        self,
        values: Mapping[str, Any] | None = None,
        values_files: Iterable[Path] = (),
        extra: Iterable[str] = (),
    ) -> list[Manifest]:
        """Rendered objects for BASE plus ``values`` (or exactly ``values_files``)."""
        merged = dict(values or {}) if values_files else {**BASE, **(values or {})}
        args = tuple(self.template_args(merged, values_files, extra))
        # A values file may change under the same path; values given inline render alike
        # every time, so many tests share one helm run (each still parses its own objects).
        text = (_rendered if values_files else _rendered_once)(self, args)
        return [doc for doc in yaml.load_all(text, Loader=SafeLoader) if doc]

    def template_error(self, values: Mapping[str, Any]) -> str:
        """stderr of a render expected to fail on exactly ``values`` (no BASE)."""
        done = self.run(*self.template_args(values, (), ()))
        assert done.returncode != 0, "render succeeded but should have failed"
        return done.stderr

    def lint(
        self, values: Mapping[str, Any], values_files: Iterable[Path] = ()
    ) -> subprocess.CompletedProcess[str]:
        files = [arg for path in values_files for arg in ("-f", str(path))]
        return self.run("lint", "--strict", str(CHART), *files, *set_args(values))


def _rendered(helm: Helm, args: tuple[str, ...]) -> str:
    done = helm.run(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


_rendered_once = functools.lru_cache(maxsize=256)(_rendered)


def of_kind(docs: list[Manifest], kind: str) -> dict[str, Manifest]:
    return {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == kind}


def component_of(doc: Manifest) -> str:
    return str(doc["metadata"]["labels"]["app.kubernetes.io/component"])


def deployments(docs: list[Manifest]) -> dict[str, Manifest]:
    """Deployments by component name."""
    return {component_of(doc): doc for doc in docs if doc["kind"] == "Deployment"}


def container(deployment: Manifest) -> dict[str, Any]:
    (only,) = deployment["spec"]["template"]["spec"]["containers"]
    return dict(only)


def env(deployment: Manifest) -> dict[str, Any]:
    """Container env by name: the plain value, or the valueFrom mapping."""
    entries = container(deployment).get("env", [])
    return {item["name"]: item.get("value", item.get("valueFrom")) for item in entries}


def config_data(docs: list[Manifest]) -> dict[str, str]:
    (configmap,) = of_kind(docs, "ConfigMap").values()
    return dict(configmap["data"])


def name_of(component: str) -> str:
    return f"{RELEASE}-resetgate-{component}"

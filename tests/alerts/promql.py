"""What the alert and dashboard tests share: paths, promtool, exported names, PromQL names.

Metric names are checked against shared/metrics.py (the one place the services define what
they export), so a rule or a panel that names a metric nobody exports fails here instead of
staying silent in production.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.metrics import MetricWrapperBase

ROOT = Path(__file__).resolve().parents[2]
RULES_FILE = ROOT / "charts" / "resetgate" / "files" / "alerts.rules.yml"
RUNBOOK = ROOT / "docs" / "runbook.md"
# What on-call types, in order (the branches, switching, rollback): the runbook's other page.
PROCEDURES = ROOT / "docs" / "procedures.md"
DASHBOARD = ROOT / "charts" / "resetgate" / "files" / "dashboard.json"
INSTALLER = ROOT / "tools" / "install-prometheus.sh"
UNIT_TESTS = sorted((ROOT / "tests" / "alerts").glob("*.test.yml"))

# Sample suffixes each metric type puts on the wire (`_created` is left out on purpose:
# nothing should alert on it).
_SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_sum", "_count"),
    "summary": ("_sum", "_count"),
    "gauge": ("",),
    "info": ("_info",),
    "stateset": ("",),
    "enum": ("",),
}


def ensure_binary(name: str) -> str:
    """Path of a Prometheus binary, installing the Debian package first when it is missing.

    Fails (never skips): an alert suite that silently does not run is the failure mode
    these tests exist to prevent.
    """
    found = shutil.which(name)
    if found is None:
        result = subprocess.run(
            ["sh", str(INSTALLER)], capture_output=True, text=True, timeout=600, check=False
        )
        found = shutil.which(name)
        if found is None:
            pytest.fail(
                f"{name} is not installed and {INSTALLER.name} could not install it "
                f"(exit {result.returncode}): {result.stderr.strip()[-2000:]}"
            )
    return found


def run_promtool(*args: str) -> subprocess.CompletedProcess[str]:
    promtool = ensure_binary("promtool")
    return subprocess.run(
        [promtool, *args], capture_output=True, text=True, timeout=120, cwd=ROOT, check=False
    )


# The rules file's stand-in for the release's label matchers, and what the tests put there:
# the chart renders metrics.prometheusRule.selector (default namespace="<release namespace>")
# the same way (tests/chart/test_chart_monitoring.py holds the two to one another).
SELECTOR_PLACEHOLDER = 'release_selector=""'
TEST_SELECTOR = 'namespace="prod"'


def render_rules(selector: str = TEST_SELECTOR) -> str:
    """The rules file with the release's label matchers in every selector."""
    return RULES_FILE.read_text().replace(SELECTOR_PLACEHOLDER, selector)


def promtool_unit_tests(
    paths: list[Path], workdir: Path, selector: str = TEST_SELECTOR
) -> subprocess.CompletedProcess[str]:
    """`promtool test rules` for ``paths`` against the rules rendered with ``selector``."""
    rendered = workdir / "alerts.rules.yml"
    rendered.write_text(render_rules(selector))
    copies = []
    for path in paths:
        document = yaml.safe_load(path.read_text())
        document["rule_files"] = [str(rendered)]
        copy = workdir / path.name
        copy.write_text(yaml.safe_dump(document, sort_keys=False))
        copies.append(str(copy))
    return run_promtool("test", "rules", *copies)


def exported_metric_names() -> set[str]:
    """Every sample name the services can export, read from shared.metrics."""
    from shared import metrics

    names: set[str] = set()
    for value in vars(metrics).values():
        if isinstance(value, MetricWrapperBase):
            suffixes = _SUFFIXES.get(value._type or "", ("",))
            names.update(value._name + suffix for suffix in suffixes)
    return names


def load_rules() -> list[dict[str, Any]]:
    document = yaml.safe_load(RULES_FILE.read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def alert_rules() -> list[dict[str, Any]]:
    return [rule for rule in load_rules() if "alert" in rule]


def recorded_names() -> set[str]:
    return {rule["record"] for rule in load_rules() if "record" in rule}


# Order matters: strings may hold braces, label matchers hold label names, grouping
# clauses hold label names, ranges hold durations. What is left are functions (followed by
# a parenthesis), keywords and metric names.
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_COMMENTS = re.compile(r"#[^\n]*")
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGES = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENTIFIER = re.compile(r"(?<![\w.:])([A-Za-z_:][\w:]*)(\s*\()?")
_KEYWORDS = frozenset(
    {
        "and",
        "or",
        "unless",
        "bool",
        "offset",
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "inf",
        "nan",
        "atan2",
    }
)


def metric_names(expr: str) -> set[str]:
    """Metric names a (valid) PromQL expression selects."""
    if "__name__" in expr:
        raise ValueError(f"select metrics by name, not by __name__ matcher: {expr}")
    text = _STRINGS.sub('""', expr)
    text = _COMMENTS.sub("", text)
    for pattern in (_MATCHERS, _RANGES, _GROUPING):
        text = pattern.sub(" ", text)
    names = set()
    for match in _IDENTIFIER.finditer(text):
        word, call = match.group(1), match.group(2)
        if call is None and word.lower() not in _KEYWORDS:
            names.add(word)
    return names


def github_anchors(markdown: str) -> set[str]:
    """Anchors GitHub generates for the headings of a Markdown document."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    in_fence = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
        if in_fence or not re.match(r"#{1,6} ", line):
            continue
        heading = line.lstrip("#").strip().lower()
        slug = re.sub(r"[^\w\- ]", "", heading).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors

"""The alert rules: promtool accepts them, every alert is unit-tested both ways, pages are
about player harm, every alert takes the responder to a runbook section and a partition, and
every metric a rule names is one the services export."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.alerts.promql import (
    RULES_FILE,
    RUNBOOK,
    SELECTOR_PLACEHOLDER,
    UNIT_TESTS,
    alert_rules,
    ensure_binary,
    exported_metric_names,
    github_anchors,
    load_rules,
    metric_names,
    promtool_unit_tests,
    recorded_names,
    render_rules,
    run_promtool,
)

# Player harm pages; everything else is context. Changing this set is a policy decision,
# so it is spelled out here rather than derived.
PAGES = {
    "OperationsExhausted",
    "OldestEligibleAgeHigh",
    "SendersStalled",
    "PartitionProviderNotConfigured",
    "ProviderCredentialsRejected",
    "ProviderPaused",
    "ProviderFailoverStarted",
    "AmbiguousAttemptsRising",
    # the silent failures: nothing would page on player harm because nothing is measured
    "SendersGone",
    "AdmissionUnavailable",
    "AdmissionErrorsHigh",
    "RedisDown",
    "PollerStalled",
}
NOT_PAGES = {
    "ProviderThrottlingHigh": "warning",
    "DeliveryObservationLagging": "warning",
    "BouncesRising": "ticket",
    "ContactFormsDeadLettered": "ticket",
    "AlertInputsMissing": "warning",
    "RedisEvictionPolicyUnsafe": "ticket",
    "RedisMaySendTwice": "ticket",
    "PushedEventsRefused": "warning",
    "PushedEventsDropped": "ticket",
    "QueueMessagesUnparseable": "ticket",
    "PublicBudgetFilling": "warning",
    "ProviderMisconfigured": "warning",
    "ArchiveLagHigh": "warning",
}
# Alerts built on per-partition metrics must name the partition they fire for.
PARTITIONED = {
    "OperationsExhausted",
    "OldestEligibleAgeHigh",
    "SendersStalled",
    "AmbiguousAttemptsRising",
    "PartitionProviderNotConfigured",
}
RUNBOOK_URL = re.compile(r"^docs/runbook\.md#([a-z0-9-]+)$")


def unit_test_cases() -> dict[str, list[dict[str, Any]]]:
    """alertname -> every alert_rule_test entry that checks it, across the *.test.yml files."""
    cases: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for path in UNIT_TESTS:
        for test in yaml.safe_load(path.read_text())["tests"]:
            for case in test.get("alert_rule_test", []):
                cases[case["alertname"]].append(case)
    return cases


def test_promtool_check_rules_passes(tmp_path: Path) -> None:
    # As written (one release per Prometheus) and as the chart renders it.
    rendered = tmp_path / "rendered.rules.yml"
    rendered.write_text(render_rules())
    result = run_promtool("check", "rules", str(RULES_FILE), str(rendered))
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_unit_tests_pass(tmp_path: Path) -> None:
    assert UNIT_TESTS, "no tests/alerts/*.test.yml found"
    result = promtool_unit_tests(UNIT_TESTS, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_shared_prometheus_pages_without_a_release_selector(tmp_path: Path) -> None:
    # The rules as written (selector matching every series) still keep releases apart,
    # because every aggregation keeps `namespace`: prod's stall pages while staging sends.
    (shared,) = [path for path in UNIT_TESTS if path.name == "shared.test.yml"]
    result = promtool_unit_tests([shared], tmp_path, 'release_selector=""')
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_selector_carries_the_release_selector() -> None:
    # A selector without it would read every release's series in a shared Prometheus.
    for rule in load_rules():
        for name in metric_names(rule["expr"]):
            pattern = rf'(?<![\w:"]){re.escape(name)}(\{{[^}}]*\}})?'
            for match in re.finditer(pattern, rule["expr"]):
                matchers = match.group(1) or ""
                assert SELECTOR_PLACEHOLDER in matchers, (
                    f"{rule.get('alert') or rule.get('record')}: {name} without the selector"
                )


def test_every_alert_fires_with_its_namespace() -> None:
    # Pages from a shared Prometheus must say which release they are about.
    for name, cases in unit_test_cases().items():
        for case in cases:
            for alert in case.get("exp_alerts") or []:
                assert alert["exp_labels"].get("namespace") == "prod", name


def test_unit_tests_load_the_shipped_rules_file() -> None:
    for path in UNIT_TESTS:
        rule_files = yaml.safe_load(path.read_text())["rule_files"]
        resolved = {(path.parent / name).resolve() for name in rule_files}
        assert resolved == {RULES_FILE.resolve()}, path.name


def test_every_alert_is_tested_firing_and_silent() -> None:
    cases = unit_test_cases()
    for rule in alert_rules():
        name = rule["alert"]
        expectations = [bool(case.get("exp_alerts")) for case in cases.get(name, [])]
        assert True in expectations, f"{name}: no unit test where it fires"
        assert False in expectations, f"{name}: no unit test where it stays silent"


def test_pages_are_player_harm_and_the_rest_are_context() -> None:
    severities = {rule["alert"]: rule["labels"]["severity"] for rule in alert_rules()}
    assert {name for name, sev in severities.items() if sev == "page"} == PAGES
    assert {name: sev for name, sev in severities.items() if sev != "page"} == NOT_PAGES


def test_every_alert_has_summary_description_and_runbook_anchor() -> None:
    anchors = github_anchors(RUNBOOK.read_text())
    for rule in alert_rules():
        annotations = rule["annotations"]
        assert annotations.get("summary"), rule["alert"]
        assert annotations.get("description"), rule["alert"]
        match = RUNBOOK_URL.match(annotations.get("runbook_url", ""))
        assert match, f"{rule['alert']}: runbook_url must be docs/runbook.md#<anchor>"
        assert match.group(1) in anchors, f"{rule['alert']}: no heading #{match.group(1)}"


def test_runbook_anchors_are_unique_per_alert() -> None:
    urls = [rule["annotations"]["runbook_url"] for rule in alert_rules()]
    assert len(urls) == len(set(urls))


def test_partitioned_alerts_fire_with_their_partition() -> None:
    cases = unit_test_cases()
    for name in PARTITIONED:
        fired = [alert for case in cases[name] for alert in case.get("exp_alerts") or []]
        assert fired, name
        for alert in fired:
            assert "partition" in alert["exp_labels"], f"{name} fired without a partition"


def test_rules_name_only_exported_metrics() -> None:
    allowed = exported_metric_names() | recorded_names()
    for rule in load_rules():
        unknown = metric_names(rule["expr"]) - allowed
        assert not unknown, f"{rule.get('alert') or rule.get('record')}: not exported {unknown}"


def test_recording_rules_only_use_exported_metrics_or_constants() -> None:
    exported = exported_metric_names()
    for rule in load_rules():
        if "record" in rule:
            assert metric_names(rule["expr"]) <= exported, rule["record"]


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (
            'sum by (partition) (increase(resetgate_a_total{queue="send"}[5m])) > 0',
            {"resetgate_a_total"},
        ),
        ("a / on () group_left () max(b) > 0.25e1", {"a", "b"}),
        ('label_replace(absent(x), "m", "y", "", "")', {"x"}),
        ("histogram_quantile(0.9, sum by (le) (rate(h_bucket[1m]))) offset 5m", {"h_bucket"}),
        ("x unless x offset 15m or vector(1) and bool_metric", {"x", "bool_metric"}),
    ],
)
def test_metric_name_extraction(expr: str, expected: set[str]) -> None:
    assert metric_names(expr) == expected


def test_a_missing_binary_fails_the_suite_instead_of_skipping() -> None:
    # The installer runs (and finds promtool and prometheus present), the binary asked for
    # is still absent: that must be a failure, never a skip.
    with pytest.raises(pytest.fail.Exception, match="could not install it"):
        ensure_binary("promtool-that-does-not-exist")

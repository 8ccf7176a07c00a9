"""The runbook and its procedures page: the three branches, the procedures, links that
resolve, and only the `resetgate` commands that exist."""

from __future__ import annotations

import re

from tests.alerts.promql import PROCEDURES, RUNBOOK, github_anchors

PAGES = (RUNBOOK, PROCEDURES)

# The operator CLI, exactly as it is built (services/ctl). A step that names anything else
# would send a responder to a command that does not exist.
COMMANDS = [
    r"resetgate ops oldest( --limit N| --partition P| --limit \d+| --partition \d+)*",
    r"resetgate ops oldest \[--limit N\] \[--partition P\]",
    r"resetgate ops show OPERATION_ID",
    r"resetgate ops pause (PARTITION\\?\|--all|P\d?|--all)",
    r"resetgate ops resume (PARTITION\\?\|--all|P\d?|--all)",
    r"resetgate ops drain (PARTITION|P)",
    r'resetgate ops quarantine OPERATION_ID --reason (TEXT|"[^"`]+")',
    r"resetgate ops release OPERATION_ID",
    r"resetgate ops status",
    r"resetgate ops provider-resume( --provider [A-Za-z0-9]+)?",
    r"resetgate ops review list",
    r"resetgate ops review release OPERATION_ID",
    r"resetgate ops review close OPERATION_ID --reason TEXT",
    r"resetgate ops provider show",
    r"resetgate ops provider switch --partitions [\d,-]+ --to [a-z0-9]+",
    r"resetgate ops provider rollback",
    r"resetgate ops provider switch --to [a-z0-9]+ --progressive",
    r"resetgate ops provider stop( --rollback| \[--rollback\])?",
    r"resetgate providers check( --provider [a-z0-9]+| --provider NAME)?",
    r"resetgate archive migrate",
]
SECTIONS = [
    "429-rising-while-queue-age-is-inside-the-objective-preserve-backpressure",
    "queue-age-threatening-token-expiry",
    "ambiguous-attempts-rising-pause-replay-reconcile",
    "rollback-that-keeps-cooldowns-operation-ids-and-queued-work",
    "switching-providers",
    "resuming-one-partition-then-widening",
]


def test_branches_and_procedures_have_sections() -> None:
    anchors = github_anchors(PROCEDURES.read_text())
    assert not set(SECTIONS) - anchors


def test_internal_links_resolve() -> None:
    """Within a page (#anchor) and from one page to the other (runbook.md#anchor)."""
    links = []
    for page in PAGES:
        text = page.read_text()
        links += [(page, anchor) for anchor in re.findall(r"\]\(#([^)]+)\)", text)]
        links += [
            (other, anchor)
            for other in PAGES
            for anchor in re.findall(rf"\]\({other.name}#([^)]+)\)", text)
        ]
    assert links
    unresolved = [(p.name, a) for p, a in links if a not in github_anchors(p.read_text())]
    assert not unresolved


def test_every_command_named_exists() -> None:
    named = [c for page in PAGES for c in re.findall(r"`(resetgate [^`]*)`", page.read_text())]
    assert named
    unknown = [
        command
        for command in named
        if command != "resetgate"
        and not any(re.fullmatch(pattern, command) for pattern in COMMANDS)
    ]
    assert not unknown


def test_every_numbered_step_names_a_command() -> None:
    # A step without a command is a step a tired responder has to improvise. Steps that are
    # not resetgate actions (helm, the provider console, pods) must say so, so nobody hunts
    # for a command that does not exist.
    for step in (s for page in PAGES for s in numbered_steps(page.read_text())):
        assert "`resetgate " in step or "not a `resetgate` command" in step, step


def numbered_steps(text: str) -> list[str]:
    steps: list[str] = []
    for line in text.splitlines():
        if re.match(r"\d+\. ", line):
            steps.append(line)
        elif steps and line.startswith("   "):
            steps[-1] += " " + line.strip()
    return steps

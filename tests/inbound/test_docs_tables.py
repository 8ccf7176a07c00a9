"""The event tables in docs/delivery-events.md say exactly what the code's tables do."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from services.poller.inbound import mailgun, postmark, sendgrid, ses
from services.poller.inbound.events import Acceptance, Meaning

DOC = Path(__file__).resolve().parents[2] / "docs" / "delivery-events.md"
HEADINGS = {
    sendgrid: "#### SendGrid",
    mailgun: "#### Mailgun",
    postmark: "#### Postmark",
    ses: "#### Amazon SES",
}
ROW = re.compile(r"^\| `([^`]+)` \| (?:`([a-z]+)`|\*(accepted|ignored)\*) \|$")


def documented(heading: str) -> dict[str, str]:
    text = DOC.read_text()
    section = text[text.index(heading) :].split("\n####", 1)[0].split("\n### ", 1)[0]
    rows = {}
    for line in section.splitlines():
        if match := ROW.match(line):
            rows[match[1]] = match[2] or match[3]
    return rows


def spoken(meaning: Meaning) -> str:
    if meaning is None:
        return "ignored"
    return "accepted" if isinstance(meaning, Acceptance) else str(meaning)


@pytest.mark.parametrize("module", list(HEADINGS), ids=lambda m: m.KIND.name)
def test_documented_table_matches_the_code(module: object) -> None:
    table = module.TABLE  # type: ignore[attr-defined]
    assert documented(HEADINGS[module]) == {k: spoken(v) for k, v in table.items()}  # type: ignore[index]

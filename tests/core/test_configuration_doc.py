"""docs/configuration.md is the one table of settings: every variable it names exists in a
settings class with the default it shows, and every setting of the services is in it or on
the service's own page. (The README's old table had drifted: a provider-name default that
`make run` did not use, no word of several settings.)"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from pydantic_settings import BaseSettings

from services.admission.settings import AdmissionSettings, ConsoleSettings
from services.poller.settings import PollerSettings
from services.router.settings import RouterSettings
from services.sender.settings import SenderSettings
from shared.providers.named import LIST_VARIABLE
from shared.providers.registry import KINDS
from shared.settings import ENV_PREFIX

DOCS = Path(__file__).resolve().parents[2] / "docs"
CLASSES: tuple[type[BaseSettings], ...] = (
    AdmissionSettings,
    SenderSettings,
    PollerSettings,
    RouterSettings,
    ConsoleSettings,
)
# Settings documented on their service's page rather than in the table (the table says so).
PAGES = (
    "poller-router.md",
    "providers.md",
    "console.md",
    "api.md",
    "delivery-events.md",
    "provider-refusals.md",
    "switching.md",
)


def table_rows() -> list[tuple[list[str], str]]:
    """(variable names, default cell) for each row of the table."""
    rows = []
    for line in (DOCS / "configuration.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if not line.startswith("| `") or len(cells) < 4:
            continue
        names = re.findall(r"`([A-Z0-9_]+)`", cells[0])
        # `POSTMARK_WEBHOOK_USERNAME` / `_PASSWORD`: the second shares the first's stem
        for i, name in enumerate(names):
            if name.startswith("_"):
                names[i] = names[i - 1].rsplit("_", 1)[0] + name
        rows.append((names, cells[1]))
    return rows


def fields() -> dict[str, Any]:
    # Read from the environment by shared.providers.named (each name's own variables follow).
    found: dict[str, Any] = {LIST_VARIABLE.removeprefix(ENV_PREFIX): None}
    for cls in CLASSES:
        for name, info in cls.model_fields.items():
            found.setdefault(name.upper(), info.default)
    # Each provider kind's own settings (its module's classes: its account's and its pushed
    # events'): RESETGATE_<FIELD> too, but for a field read from an SDK's own variables (its
    # alias, AWS_REGION).
    for kind in KINDS.values():
        own = kind.settings.model_fields | kind.inbound_settings.model_fields
        for name, info in own.items():
            if info.validation_alias is None:
                found.setdefault(name.upper(), info.default)
    return found


def shown(default: Any) -> str | None:
    """How the table writes a default; None where it cannot be compared (secret, computed)."""
    if isinstance(default, SecretStr) or default is None or callable(default):
        return None
    if isinstance(default, bool):
        return str(default).lower()
    if isinstance(default, float) and default.is_integer():
        return str(int(default))
    return str(default)


def test_every_variable_in_the_table_exists_with_its_default() -> None:
    known = fields()
    checked = 0
    for names, default_cell in table_rows():
        parts = [p.strip() for p in default_cell.split(" / ")]
        for index, name in enumerate(names):
            assert name in known, f"{name} is in docs/configuration.md but in no settings class"
            literal = re.fullmatch(r"`([^`]*)`", parts[index]) if index < len(parts) else None
            expected = shown(known[name])
            if literal and expected is not None and len(parts) == len(names):
                assert literal.group(1) == expected, (name, literal.group(1), expected)
                checked += 1
    assert checked >= 25, "the defaults of most rows are compared"


def test_every_setting_is_in_the_table_or_on_its_services_page() -> None:
    in_table = {name for names, _ in table_rows() for name in names}
    pages = " ".join((DOCS / page).read_text() for page in PAGES)
    missing = [
        name
        for name in fields()
        if name not in in_table
        and f"RESETGATE_{name}" not in pages
        and f"`{name}`" not in pages
        and f"`{name.lower()}`" not in pages
    ]
    assert missing == [], f"settings documented nowhere: {missing}"


def test_the_provider_name_default_is_said_as_make_run_uses_it() -> None:
    row = next(cell for names, cell in table_rows() if names == ["PROVIDER_NAME"])
    assert row == "`default`"
    text = (DOCS / "configuration.md").read_text()
    assert "`make run` names it after its `--provider` kind" in text

"""docs/design.md's key table is shared/keys.py: every key family keys.py builds is a row,
and every row is a key keys.py builds (the table had lost the audit stream, the console's
sessions, the router's keys and the directory)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from shared import keys

DESIGN = Path(__file__).resolve().parents[2] / "docs" / "design.md"
# How the table writes each builder argument.
PLACEHOLDERS = {
    "account_id": "<account>",
    "operation_id": "<id>",
    "provider": "<provider>",
    "login": "<login>",
    "digest": "<digest>",
    "client_ip": "<address>",
    "session_hash": "<digest>",
    "event_id": "<id>",
}


def documented() -> set[str]:
    text = DESIGN.read_text()
    table = text[text.index("## Keys, partitions, Cluster") :].split("\n## ")[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`([^`]+)`", row.split("|")[1])}


def built() -> set[str]:
    """Every key keys.py can build, its variable parts written as the table writes them."""
    partition = keys.PartitionKeys("p")  # type: ignore[arg-type]  # renders the tag as {p}
    found = set()
    for name, member in vars(keys.PartitionKeys).items():
        if isinstance(member, property) and name != "tag":
            found.add(getattr(partition, name))
        elif inspect.isfunction(member) and not name.startswith("_"):
            (argument,) = list(inspect.signature(member).parameters)[1:]
            found.add(member(partition, PLACEHOLDERS[argument]))
    builders = [
        f
        for n, f in vars(keys).items()
        if inspect.isfunction(f)
        and f.__module__ == keys.__name__
        and inspect.signature(f).return_annotation == "str"
        and not n.startswith("partition_of")
    ]
    for builder in builders:
        found.add(builder(*(PLACEHOLDERS[a] for a in inspect.signature(builder).parameters)))
    made = set(found)  # a constant that only prefixes a builder's keys is no key itself
    for name, value in vars(keys).items():
        a_key = isinstance(value, str) and name.isupper() and value.startswith(keys.PREFIX + ":")
        if a_key and not any(key.startswith(value) for key in made):
            found.add(value + "<id>" if value.endswith(":") else value)
    return found


def test_the_design_key_table_is_the_keys_module() -> None:
    assert documented() == built()


def test_no_test_spells_a_key_itself() -> None:
    """Tests build keys with shared.keys (or tests/support/keys.py for patterns) as the code
    does: a literal ``"rg:…"`` goes on passing after the key it names was renamed, checking
    a key nothing writes any more."""
    tests = Path(__file__).resolve().parents[1]
    literal = re.compile(r"""(?<![\w.])[fbr]?["']rg(dir)?:""")
    spelled = [
        f"{path.relative_to(tests)}:{number}: {line.strip()}"
        for path in sorted(tests.rglob("*.py"))
        if path != Path(__file__).resolve()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if literal.search(line.split("#")[0])
    ]
    assert not spelled, "\n".join(spelled)

"""The Lua <-> Python contract: each script's header against its typed request.

Every script in shared/scripts/*.lua documents its KEYS and ARGV one per line, as
``-- KEYS[1] name: ...`` (``-- ARGV[2..] name: ...`` for a trailing variadic run), and is
called through exactly one ``shared.scripts.Request`` whose fields carry the same names in
the same order. Checked here, without Redis:

- the header names what the request sends, position by position;
- the script's body reads exactly the positions its header documents (admit.lua once read
  ARGV[14] while its header listed ARGV[11] twice and stopped at 13);
- every reply code the body returns decodes into the request's enum, and is documented;
- no script spells a name Python owns (the stream group, the job field, ...).
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from shared.scripts import NAMES, REQUESTS, Request

SCRIPTS = Path(__file__).resolve().parents[2] / "shared/scripts"
NAMES_OF_SCRIPTS = sorted(p.stem for p in SCRIPTS.glob("*.lua"))

# Where the requests are defined: importing these fills shared.scripts.REQUESTS.
WRAPPERS = (
    "shared.admit",
    "shared.operations",
    "shared.observation",
    "shared.pacing",
    "shared.quota",
    "services.admission.tokens",
    "services.admission.ratelimit",
    "services.router.cases",
)
for module in WRAPPERS:
    importlib.import_module(module)

_ENTRY = re.compile(r"^--\s+(KEYS|ARGV)\[(\d+)(\.\.)?\]\s+([a-z_][a-z0-9_]*):?")
_USE = re.compile(r"\b(KEYS|ARGV)\[(\d+)\]")
_CODE = re.compile(r'\breturn\s*\{\s*"([a-z_]+)"')


@dataclass(frozen=True)
class Entry:
    kind: str  # KEYS or ARGV
    position: int
    variadic: bool
    name: str


def header(source: str) -> list[str]:
    """The leading comment block (up to the first line of code or prelude marker)."""
    lines = []
    for line in source.splitlines():
        if not line.startswith("--") or line.startswith("-- @"):
            break
        lines.append(line)
    return lines


def documented(source: str) -> list[Entry]:
    found = []
    for line in header(source):
        if match := _ENTRY.match(line):
            kind, position, dots, name = match.groups()
            found.append(Entry(kind, int(position), bool(dots), name))
    return found


def body(source: str) -> str:
    """The code, comments stripped."""
    code = source.splitlines()[len(header(source)) :]
    return "\n".join(line.split("--", 1)[0] for line in code)


def source_of(name: str) -> str:
    return (SCRIPTS / f"{name}.lua").read_text()


def request_of(name: str) -> type[Request[object]]:
    request = REQUESTS.get(name)
    assert request is not None, f"{name}.lua has no Request (define one beside its wrapper)"
    return request


def test_every_script_has_one_request_and_every_request_a_script() -> None:
    assert sorted(REQUESTS) == NAMES_OF_SCRIPTS


@pytest.mark.parametrize("name", NAMES_OF_SCRIPTS)
def test_the_header_names_what_the_request_sends(name: str) -> None:
    entries = documented(source_of(name))
    keys, args = request_of(name).layout()
    for kind, part in (("KEYS", keys), ("ARGV", args)):
        listed = [e for e in entries if e.kind == kind]
        assert [e.position for e in listed] == list(range(1, len(listed) + 1)), (
            f"{name}.lua: {kind} positions must run 1, 2, ... once each"
        )
        assert [e.name for e in listed] == list(part.names), f"{name}.lua {kind}"
        assert [e.variadic for e in listed] == [
            part.variadic and i == len(part.names) - 1 for i in range(len(part.names))
        ], f"{name}.lua {kind}: only the last entry may be variadic, as in the request"


@pytest.mark.parametrize("name", NAMES_OF_SCRIPTS)
def test_the_body_reads_exactly_what_the_header_documents(name: str) -> None:
    source = source_of(name)
    entries = documented(source)
    used = {(kind, int(n)) for kind, n in _USE.findall(body(source))}
    fixed = {(e.kind, e.position) for e in entries if not e.variadic}
    assert used - fixed == set(), f"{name}.lua reads undocumented positions"
    assert fixed - used == set(), f"{name}.lua documents positions it never reads"


@pytest.mark.parametrize("name", NAMES_OF_SCRIPTS)
def test_every_reply_code_decodes_and_is_documented(name: str) -> None:
    source = source_of(name)
    codes = set(_CODE.findall(body(source)))
    request = request_of(name)
    if request.CODES is None:
        assert codes == set(), f"{name}.lua replies with codes: give its request CODES"
        return
    assert codes, f"{name}.lua returns no code, yet its request has CODES"
    assert codes <= {str(c) for c in request.CODES}, f"{name}.lua codes its enum lacks"
    text = "\n".join(header(source))
    assert {c for c in codes if f'"{c}"' not in text} == set(), f"{name}.lua: undocumented"


@pytest.mark.parametrize("name", NAMES_OF_SCRIPTS)
def test_no_script_spells_a_name_python_owns(name: str) -> None:
    code = body(source_of(name))
    assert [v for v in NAMES.values() if f'"{v}"' in code] == []

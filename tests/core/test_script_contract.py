"""The Lua <-> Python contract: each script against its typed request.

A script's KEYS and ARGV are stated once, by its ``shared.scripts.Request`` (a module of the
``shared.scripts`` package): the script reads them as the named locals rendered in place of
its ``-- @request`` line, and its header documents them by name, one per line, as
``-- key name: ...`` / ``-- arg name: ...`` (``-- arg name...: ...`` for a trailing variadic
run). Checked here, without Redis, for every request the package's modules define:

- every script has exactly one request, and reads its names through ``-- @request``;
- the header names what the request sends, in the request's order;
- the body never reads KEYS or ARGV itself, and reads every name the request sends;
- every reply code the body returns decodes into the request's enum, and is documented;
- no script spells a name Python owns (the stream group, the job field, ...).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

import shared.scripts
from shared.scripts import NAMES, REQUEST_MARKER, REQUESTS, Request

SCRIPTS = Path(shared.scripts.__file__).parent
NAMES_OF_SCRIPTS = sorted(p.stem for p in SCRIPTS.glob("*.lua"))

# Importing every module of the package fills shared.scripts.REQUESTS: no list to keep.
for module in pkgutil.iter_modules(shared.scripts.__path__, "shared.scripts."):
    importlib.import_module(module.name)

_ENTRY = re.compile(r"^--\s+(key|arg)\s+([a-z_][a-z0-9_]*)(\.\.\.)?(?::|\s*$)")
_POSITIONAL = re.compile(r"\b(KEYS|ARGV)\b")
_CODE = re.compile(r'\breturn\s*\{\s*"([a-z_]+)"')


@dataclass(frozen=True)
class Entry:
    kind: str  # key or arg
    name: str
    variadic: bool


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
            kind, name, dots = match.groups()
            found.append(Entry(kind, name, bool(dots)))
    return found


def body(source: str) -> str:
    """The code, comments (and so the prelude markers) stripped."""
    code = source.splitlines()[len(header(source)) :]
    return "\n".join(line.split("--", 1)[0] for line in code)


def source_of(name: str) -> str:
    return (SCRIPTS / f"{name}.lua").read_text()


def request_of(name: str) -> type[Request[object]]:
    request = REQUESTS.get(name)
    assert request is not None, f"{name}.lua has no Request (define one in shared/scripts/)"
    return request


def test_every_script_has_one_request_and_every_request_a_script() -> None:
    assert sorted(REQUESTS) == NAMES_OF_SCRIPTS


@pytest.mark.parametrize("name", NAMES_OF_SCRIPTS)
def test_every_script_reads_its_names_from_its_request(name: str) -> None:
    source = source_of(name)
    assert REQUEST_MARKER in source, f"{name}.lua has no {REQUEST_MARKER.strip()} line"
    assert request_of(name).SCRIPT.request is request_of(name)


@pytest.mark.parametrize("name", NAMES_OF_SCRIPTS)
def test_the_header_names_what_the_request_sends(name: str) -> None:
    entries = documented(source_of(name))
    keys, args = request_of(name).layout()
    for kind, part in (("key", keys), ("arg", args)):
        listed = [e for e in entries if e.kind == kind]
        assert [e.name for e in listed] == list(part.names), f"{name}.lua {kind}s"
        assert [e.variadic for e in listed] == [
            part.variadic and i == len(part.names) - 1 for i in range(len(part.names))
        ], f"{name}.lua {kind}s: only the last may be variadic (name...), as in the request"


@pytest.mark.parametrize("name", NAMES_OF_SCRIPTS)
def test_the_body_reads_every_name_and_no_position(name: str) -> None:
    code = body(source_of(name))
    assert _POSITIONAL.findall(code) == [], f"{name}.lua reads KEYS/ARGV by number"
    keys, args = request_of(name).layout()
    unread = [n for n in (*keys.names, *args.names) if not re.search(rf"\b{n}\b", code)]
    assert unread == [], f"{name}.lua is sent names it never reads"


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


def test_the_rendered_locals_follow_the_request() -> None:
    """What replaces -- @request: keys as strings, numbers through tonumber, a bool as a
    comparison, a variadic run as a table filled by a loop (never unpack)."""
    rendered = request_of("promote_due").SCRIPT.source
    assert "local due, send = KEYS[1], KEYS[2]\n" in rendered
    assert "for i = 3, #KEYS do operations[i - 2] = KEYS[i] end\n" in rendered
    assert "local now = tonumber(ARGV[1])\n" in rendered
    assert "for i = 2, #ARGV do operation_ids[i - 1] = ARGV[i] end\n" in rendered
    lease = request_of("lease").SCRIPT.source
    assert 'local holder, lease_ms, release = ARGV[1], tonumber(ARGV[2]), ARGV[3] == "1"\n' in lease

"""Issue 15 item 8: the README and docs/ point only at files the repository has, and the
project carries its own design and provider contract."""

from __future__ import annotations

import fnmatch
import functools
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\s]+)`")
FILE_LIKE = re.compile(r"^[\w.-]+(/[\w.*-]+)*/?$")
EXTENSIONS = (".md", ".py", ".lua", ".yaml", ".yml", ".sh", ".json", ".toml", ".tpl", ".c")
# Made by `make run` / `make test`, never committed; and media types, which look like paths.
NOT_FILES = (".run", ".venv", ".tools", "application/", "text/")


def referenced(doc: Path) -> set[str]:
    text = doc.read_text()
    links = {m.split("#")[0] for m in LINK.findall(text) if "://" not in m and m[0] != "#"}
    # A code span names a file when it ends like one or starts at one of the repository's
    # top-level entries (`docs/…`, `tests/…`); `failed/permanent` or `I/2` are not paths.
    top = {entry.name for entry in ROOT.iterdir()}
    code = {
        m
        for m in CODE.findall(text)
        if FILE_LIKE.match(m)
        and not m.startswith("/")
        and (m.endswith(EXTENSIONS) or ("/" in m and m.split("/")[0] in top))
    }
    return {ref for ref in links | code if ref and not ref.startswith(NOT_FILES)}


# Not the project's files, and far larger than it: walking .venv and .tools once per name
# took minutes on a loaded machine.
NOT_THE_PROJECT = {".git", ".venv", ".tools", ".run", ".mypy_cache", ".ruff_cache", "__pycache__"}


@functools.cache
def project_file_names() -> frozenset[str]:
    names: set[str] = set()
    for _, directories, files in os.walk(ROOT):
        directories[:] = [d for d in directories if d not in NOT_THE_PROJECT]
        names.update(files)
    return frozenset(names)


def exists(doc: Path, ref: str) -> bool:
    if "/" not in ref:  # a bare file name (`consume_token.lua`): somewhere in the project
        return any(fnmatch.fnmatchcase(name, ref) for name in project_file_names())
    for base in (doc.parent, ROOT):
        if "*" in ref and list(base.glob(ref)):
            return True
        if (base / ref).exists():
            return True
    return False


def test_every_file_the_readme_and_docs_name_exists() -> None:
    missing = [
        f"{doc.relative_to(ROOT)}: {ref}"
        for doc in DOCS
        for ref in sorted(referenced(doc))
        if not exists(doc, ref)
    ]
    assert missing == []


def test_the_design_and_the_provider_contract_are_the_projects_own() -> None:
    design = (ROOT / "docs" / "design.md").read_text()
    contract = (ROOT / "docs" / "provider-contract.md").read_text()
    for number in range(1, 11):
        assert re.search(rf"^{number}\. \*\*", design, re.M), f"invariant {number}"
    for section in ("## Architecture", "## Operation model", "## Keys", "## Services"):
        assert section in design
    for route in ("POST {base}/email/send", "GET {base}/email/events", "cursor_beyond_feed"):
        assert route in contract
    everything = "".join(p.read_text() for p in DOCS)
    assert "../shared" not in everything and "/work/shared" not in everything
    assert "PROVIDER_CONTRACT.md" not in everything and "DESIGN.md" not in everything


README_LIMIT = 20 * 1024  # the user's guide stays short; detail belongs in docs/


def test_the_readme_stays_under_its_size_limit() -> None:
    size = len((ROOT / "README.md").read_bytes())
    assert size < README_LIMIT, f"README.md is {size} bytes; move detail to docs/"


# Code names a page quotes: a dotted path into the project's packages, a snake_case or
# CamelCase name, a class's attribute (`Kind.lacks`), a `RESETGATE_*` setting, a constant
# (or a setting written without its prefix), a `resetgate_*` metric.
DOTTED = re.compile(r"^(?:shared|services|benchmarks|tests|tools)(?:\.\w+)+$")
SNAKE = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)+$")
CAMEL = re.compile(r"^[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+$")
ATTRIBUTE = re.compile(r"^([A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)*)\.([A-Za-z_]\w*)$")
SETTING = re.compile(r"^RESETGATE_[A-Z0-9_]+$")
CONSTANT = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")
# A name where it is defined: `services/sender/attempt.py::AttemptRunner`, `health.py::X`.
QUALIFIED = re.compile(r"^([\w./-]+\.(?:py|lua))::([A-Za-z_]\w*)(?:\.\w+)*$")
# Prometheus adds these to a metric's name; the code names the metric without them.
METRIC_SUFFIXES = ("_total", "_bucket", "_count", "_sum")
# Quoted, but not ours to define: other projects' names, and a setting the page says is not
# offered.
NOT_OURS = {
    "ChangeMessageVisibility",
    "SigningCertURL",  # Amazon SQS and SNS
    "ks_2samp",  # SciPy
    "large_client_header_buffers",  # nginx
    "parentbased_always_on",  # an OTEL_TRACES_SAMPLER value
    "RESETGATE_WAIT_AOF",  # reliability.md: "therefore not offered"
}
SOURCES = (".py", ".lua", ".yaml", ".yml", ".sh", ".toml", ".tpl", ".json", ".html", ".txt")


@functools.cache
def code_words() -> frozenset[str]:
    """Every name the code, scripts, chart and build files spell, and every file's stem."""
    words: set[str] = set()
    for top, directories, files in os.walk(ROOT):
        directories[:] = [d for d in directories if d not in NOT_THE_PROJECT | {"docs"}]
        for name in files:
            path = Path(top) / name
            words.add(path.stem)
            if path.suffix in SOURCES or name in ("Makefile", "Dockerfile"):
                words.update(re.findall(r"\w+", path.read_text(errors="ignore")))
    return frozenset(words)


def quoted_names(name: str) -> list[str]:
    """The names a code span stands for, if it quotes code at all."""
    name = name.removesuffix("()")
    if name in NOT_OURS:
        return []
    if DOTTED.match(name):
        return name.split(".")
    if SETTING.match(name):  # a settings field, or spelled out where no field declares it
        return [] if name in code_words() else [name.removeprefix("RESETGATE_").lower()]
    if CONSTANT.match(name):  # a constant, or a settings field's variable without its prefix
        return [] if name in code_words() else [name.lower()]
    attribute = ATTRIBUTE.match(name)
    if attribute:
        return list(attribute.groups())
    if name.startswith("resetgate_"):
        for suffix in METRIC_SUFFIXES:
            name = name.removesuffix(suffix)
    return [name] if SNAKE.match(name) or CAMEL.match(name) else []


def test_every_code_name_the_docs_quote_exists() -> None:
    """A page that names a function, class, module, setting or metric names one the code
    has: a rename that leaves a page behind fails here, not in a reader's search."""
    stale = [
        f"{doc.relative_to(ROOT)}: `{span}`"
        for doc in DOCS
        for span in re.findall(r"`([^`\n]+)`", doc.read_text())
        if any(name not in code_words() for name in quoted_names(span.strip()))
    ]
    assert not stale, "names the code does not have:\n" + "\n".join(stale)


def defined_in(path: str, name: str) -> bool:
    """True when a file ``path`` (a bare file name: any file of that name) defines ``name``:
    a def, a class, an assignment or a Lua local."""
    if "/" in path:
        files = [ROOT / path] if (ROOT / path).is_file() else []
    else:
        files = project_paths().get(path, [])
    definition = re.compile(
        rf"^\s*(?:(?:async )?def|class|local)\s+{name}\b|^\s*{name}\b\s*[:=]", re.M
    )
    return any(definition.search(f.read_text()) for f in files)


@functools.cache
def project_paths() -> dict[str, list[Path]]:
    """Each file name of the project, and where files of that name are."""
    found: dict[str, list[Path]] = {}
    for top, directories, files in os.walk(ROOT):
        directories[:] = [d for d in directories if d not in NOT_THE_PROJECT]
        for name in files:
            found.setdefault(name, []).append(Path(top) / name)
    return found


def test_every_name_the_docs_place_in_a_file_is_defined_there() -> None:
    """`services/sender/attempt.py::AttemptRunner` says where to read: a name moved to
    another module, or a file renamed, fails here."""
    misplaced = [
        f"{doc.relative_to(ROOT)}: `{span}`"
        for doc in DOCS
        for span in re.findall(r"`([^`\n]+)`", doc.read_text())
        if (found := QUALIFIED.match(span.strip().removesuffix("()")))
        and not defined_in(*found.groups())
    ]
    assert not misplaced, "not defined where the docs say:\n" + "\n".join(misplaced)


DOCS_LIMIT = 30 * 1024  # a page a reader can hold; past it, split it by reader


def test_every_docs_page_stays_under_its_size_limit() -> None:
    over = {doc.name: size for doc in DOCS[1:] if (size := len(doc.read_bytes())) >= DOCS_LIMIT}
    assert not over, f"over {DOCS_LIMIT} bytes: {over}"

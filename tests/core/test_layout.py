"""The placement rule (docs/architecture.md, "Where code lives"), checked over the tree.

Read with ``ast`` from the files of ``services/`` and ``shared/`` (nothing is imported, so a
module that would fail to import is still read). An import anywhere in a module counts: at
the top, inside a function (a lazy import) or under ``TYPE_CHECKING``. ``from a import b``
imports the module ``a.b`` when there is one, else ``a``.

1. No module of ``services/<a>/`` imports one of ``services/<b>/``.
2. Every subclass of ``shared.scripts.Request`` (directly or through another subclass) is
   defined in ``shared/scripts/``: a script and its request are the store's contract.
3. Every unit directly in ``shared/`` (a module ``shared/x.py`` or a package ``shared/x/``,
   taken whole) other than the contract (``model.py``, ``keys.py``, ``scripts/``) is used by
   at least two deployables. A deployable (a package ``services/<name>/``) uses a unit when
   one of its modules imports a module of the unit, or imports a module of ``shared/`` that
   uses it the same way, through any chain of ``shared/`` modules (a helper that only
   ``shared/b.py`` imports is used by every deployable that uses ``b``). Tests, benchmarks
   and tools do not count: they may import anything.
4. No settings module of a service (a module named ``settings`` under ``services/``) imports
   another service's modules, or a module of its own service that is not a settings module.

The last test runs the same checks over a small tree made to break each rule once, so none
of them passes by finding nothing to look at.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REQUEST = "shared.scripts.Request"
CONTRACT = frozenset({"shared.model", "shared.keys", "shared.scripts"})


@dataclass(frozen=True, slots=True)
class Module:
    name: str  # dotted: services.admission.app
    path: Path  # relative to the root
    package: bool  # an __init__.py
    tree: ast.Module


def read_tree(root: Path) -> dict[str, Module]:
    found = {}
    for top in ("services", "shared"):
        for path in sorted((root / top).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            package = parts[-1] == "__init__"
            name = ".".join(parts[:-1] if package else parts)
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            found[name] = Module(name, path.relative_to(root), package, tree)
    return found


def _known(name: str, tree: dict[str, Module]) -> str | None:
    """The longest prefix of ``name`` that is a module of the tree (None: outside it)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if (prefix := ".".join(parts[:end])) in tree:
            return prefix
    return None


def _base(module: Module, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module.name.split(".") if module.package else module.name.split(".")[:-1]
    package = package[: len(package) - node.level + 1]
    return ".".join([*package, *([node.module] if node.module else [])])


def imports(module: Module, tree: dict[str, Module]) -> Iterator[str]:
    """The modules of the tree that ``module`` imports."""
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _base(module, node)
            names = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if (known := _known(name, tree)) is not None:
                yield known


def service_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if parts[0] == "services" and len(parts) > 1 else None


def cross_service_imports(tree: dict[str, Module]) -> list[str]:
    return [
        f"{module.path} imports {name}"
        for module in tree.values()
        if (own := service_of(module.name)) is not None
        for name in imports(module, tree)
        if service_of(name) not in (None, own)
    ]


def _local_names(module: Module) -> dict[str, str]:
    """Each name a module binds by importing -> the dotted name it stands for."""
    names = {}
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.split(".")[0]
                names[local] = alias.name if alias.asname else local
        elif isinstance(node, ast.ImportFrom):
            base = _base(module, node)
            for alias in node.names:
                names[alias.asname or alias.name] = f"{base}.{alias.name}"
    return names


def _dotted(node: ast.expr, module: Module, names: dict[str, str]) -> str | None:
    if isinstance(node, ast.Subscript):  # Request[Reply]
        return _dotted(node.value, module, names)
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value, module, names)
        return f"{head}.{node.attr}" if head else None
    if isinstance(node, ast.Name):
        return names.get(node.id, f"{module.name}.{node.id}")
    return None


def misplaced_requests(tree: dict[str, Module]) -> list[str]:
    bases: dict[str, tuple[Module, set[str]]] = {}
    for module in tree.values():
        names = _local_names(module)
        for node in ast.walk(module.tree):
            if isinstance(node, ast.ClassDef):
                found = {_dotted(base, module, names) for base in node.bases}
                bases[f"{module.name}.{node.name}"] = (module, {b for b in found if b})
    requests = {REQUEST}
    while grown := {c for c, (_, of) in bases.items() if c not in requests and of & requests}:
        requests |= grown
    return sorted(
        f"{module.path}: {name.rsplit('.', 1)[1]} is a Request outside shared/scripts/"
        for name in requests - {REQUEST}
        for module in [bases[name][0]]
        if module.name != "shared.scripts" and not module.name.startswith("shared.scripts.")
    )


def unit_of(name: str) -> str | None:
    parts = name.split(".")
    return ".".join(parts[:2]) if parts[0] == "shared" and len(parts) > 1 else None


def users(tree: dict[str, Module]) -> dict[str, set[str]]:
    """Each unit of shared/ -> the deployables that use it (rule 3's definition)."""
    graph = {module.name: set(imports(module, tree)) for module in tree.values()}
    used: dict[str, set[str]] = {u: set() for name in tree if (u := unit_of(name))}
    for name in tree:
        service = service_of(name)
        if service is None:
            continue
        seen: set[str] = set()
        todo = [i for i in graph[name] if i.startswith("shared.")]
        while todo:
            current = todo.pop()
            if current in seen:
                continue
            seen.add(current)
            if (unit := unit_of(current)) is not None:
                used[unit].add(service)
            todo += [i for i in graph[current] if i.startswith("shared.")]
    return used


def shared_with_fewer_than_two_users(tree: dict[str, Module]) -> list[str]:
    return sorted(
        f"{unit} is used by {', '.join(sorted(by)) or 'no deployable'} only"
        for unit, by in users(tree).items()
        if unit not in CONTRACT and len(by) < 2
    )


def settings_imports(tree: dict[str, Module]) -> list[str]:
    return [
        f"{module.path} imports {name}"
        for module in tree.values()
        if (own := service_of(module.name)) is not None and module.name.endswith(".settings")
        for name in imports(module, tree)
        if (other := service_of(name)) is not None
        and (other != own or name.rsplit(".", 1)[-1] != "settings")
    ]


TREE = read_tree(ROOT)


def test_no_service_imports_another() -> None:
    assert cross_service_imports(TREE) == []


def test_every_request_lives_in_shared_scripts() -> None:
    assert misplaced_requests(TREE) == []


def test_every_shared_module_has_two_deployable_users() -> None:
    assert shared_with_fewer_than_two_users(TREE) == []


def test_settings_modules_import_only_settings() -> None:
    assert settings_imports(TREE) == []


BROKEN = {
    "services/__init__.py": "",
    "services/a/__init__.py": "",
    "services/a/settings.py": "from services.a import worker\nfrom services.a.x import settings\n",
    "services/a/x/__init__.py": "",
    "services/a/x/settings.py": "",
    "services/a/worker.py": "from shared import both, lonely\n",
    "services/b/__init__.py": "",
    "services/b/settings.py": "def late() -> None:\n    import services.a.x.settings\n",
    "services/b/cases.py": (
        "from shared import scripts\nfrom shared.scripts.lease import Lease\n"
        "class Claim(scripts.Request[int]): ...\nclass Sub(Lease): ...\n"
        "import services.a.worker\n"
    ),
    "services/b/main.py": "from shared.both import f\n",
    "shared/__init__.py": "",
    "shared/scripts/__init__.py": "class Request: ...\n",
    "shared/scripts/lease.py": "from . import Request\nclass Lease(Request[bool]): ...\n",
    "shared/both.py": "from shared import helper\n",
    "shared/helper.py": "",
    "shared/lonely.py": "",
    "shared/nobody/__init__.py": "",
}


def test_the_checks_catch_what_they_are_for(tmp_path: Path) -> None:
    for name, text in BROKEN.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    tree = read_tree(tmp_path)
    assert cross_service_imports(tree) == [
        "services/b/cases.py imports services.a.worker",
        "services/b/settings.py imports services.a.x.settings",
    ]
    assert misplaced_requests(tree) == [
        "services/b/cases.py: Claim is a Request outside shared/scripts/",
        "services/b/cases.py: Sub is a Request outside shared/scripts/",
    ]
    assert shared_with_fewer_than_two_users(tree) == [
        "shared.lonely is used by a only",
        "shared.nobody is used by no deployable only",
    ]
    assert settings_imports(tree) == [
        "services/a/settings.py imports services.a.worker",
        "services/b/settings.py imports services.a.x.settings",
    ]

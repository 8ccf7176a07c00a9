"""Issue 15 item 5, what can be checked without running it: `make run` installs only the
runtime dependencies; `make test` runs pytest with parallel workers and says how long it took.
(The measured time itself is in the README, with the command.)"""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

from tests.ctl.test_quickstart import newcomer_env

ROOT = Path(__file__).resolve().parents[2]


def dry_run(target: str, tmp_path: Path) -> str:
    """The commands `make <target>` would run for a fresh checkout (no virtualenv yet)."""
    done = subprocess.run(
        ["make", "-n", target, f"VENV={tmp_path / 'venv'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env=newcomer_env(),
    )
    return done.stdout


def test_make_run_installs_the_runtime_dependencies_only(tmp_path: Path) -> None:
    commands = dry_run("run", tmp_path)
    assert "pip install --progress-bar off -e .\n" in commands
    installs = [line for line in commands.splitlines() if " -e " in line]
    assert "dev" not in commands and not any("-q" in line.split() for line in installs), commands
    assert commands.rstrip().endswith("resetgate up")


def test_make_test_runs_the_suite_on_parallel_workers(tmp_path: Path) -> None:
    commands = dry_run("unit-parallel", tmp_path)
    assert "pip install --progress-bar off -e '.[dev]'" in commands, "the dev tools, with progress"
    # loadgroup: tests sharing a module or package fixture stay on one worker (tests/conftest.py)
    assert '-m pytest -q -n 6 --dist loadgroup -m "not slow and not serial"' in commands
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert any(d.startswith("pytest-xdist") for d in dev["optional-dependencies"]["dev"])
    assert not any("xdist" in d or "pytest" in d for d in dev["dependencies"])


def test_setup_installs_with_uv_once_the_virtualenv_has_it(tmp_path: Path) -> None:
    """uv resolves the same versions as pip in a tenth of the time; pip stays the fallback."""
    uv = tmp_path / "venv" / "bin" / "uv"
    uv.parent.mkdir(parents=True)
    uv.write_text("#!/bin/sh\n")
    uv.chmod(0o755)
    (tmp_path / "venv" / "bin" / "python").symlink_to("/bin/true")
    commands = dry_run("setup", tmp_path)
    assert (
        f"{uv} pip install --compile-bytecode --python {uv.parent / 'python'} -e '.[dev]'"
        in commands
    ), commands
    assert "pip install --progress-bar off" not in commands, commands


def test_make_lets_python_cache_bytecode_where_the_environment_forbids_it() -> None:
    # Several hundred Python processes per `make test`: without the cache each one compiled
    # every module it imported, about half of the suite's CPU time.
    probe = 'probe: ; @echo "[$$PYTHONDONTWRITEBYTECODE]"'
    done = subprocess.run(
        ["make", "-s", "--eval", probe, "probe"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**newcomer_env(), "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert done.stdout == "[]\n"

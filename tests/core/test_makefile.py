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
        ["make", "-n", target, f"VENV={tmp_path / 'venv'}"], cwd=ROOT, capture_output=True,
        text=True, timeout=60, check=True, env=newcomer_env(),
    )  # fmt: skip
    return done.stdout


def test_make_run_installs_the_runtime_dependencies_only(tmp_path: Path) -> None:
    commands = dry_run("run", tmp_path)
    assert "pip install --progress-bar off -e .\n" in commands
    assert "dev" not in commands and "-q" not in commands.split(), commands
    assert commands.rstrip().endswith("resetgate up")


def test_make_test_runs_the_suite_on_parallel_workers(tmp_path: Path) -> None:
    commands = dry_run("unit-parallel", tmp_path)
    assert "pip install --progress-bar off -e '.[dev]'" in commands, "the dev tools, with progress"
    # loadgroup: tests sharing a module or package fixture stay on one worker (tests/conftest.py)
    assert '-m pytest -q -n 4 --dist loadgroup -m "not slow and not serial"' in commands
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert any(d.startswith("pytest-xdist") for d in dev["optional-dependencies"]["dev"])
    assert not any("xdist" in d or "pytest" in d for d in dev["dependencies"])

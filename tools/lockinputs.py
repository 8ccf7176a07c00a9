"""The digest of what requirements.lock is made from: pyproject.toml's runtime dependencies.

``python -m tools.lockinputs`` prints it as ``pyproject-dependencies-sha256:<hex>``;
tools/lock-image.sh writes it into the lock's first line and tests/image compares them.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def dependencies_digest(pyproject: Path = ROOT / "pyproject.toml") -> str:
    project = tomllib.loads(pyproject.read_text())["project"]
    dependencies = sorted(project.get("dependencies", []))
    digest = hashlib.sha256(json.dumps(dependencies).encode()).hexdigest()
    return f"pyproject-dependencies-sha256:{digest}"


if __name__ == "__main__":
    print(dependencies_digest())

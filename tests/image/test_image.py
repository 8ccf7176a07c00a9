"""The image, checked without a container engine (the development machines have none).

- The Dockerfile's shape: a digest-pinned base, the locked dependencies in their own layer
  before the code, one copy of the code, OCI labels, nothing pip-installed from the source.
- requirements.lock: current for pyproject.toml (tools/lock-image.sh regenerates it), every
  pin hash-checked, runtime dependencies only.
- The install steps themselves (tools/image-install.sh, which the Dockerfile runs): the code
  step is replayed into a fresh venv here and the four services are started from it; the
  full replay, dependencies from the lock into a clean venv included, takes minutes of
  downloads and is marked slow (`make test-slow`).
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import re
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

from services.ctl.embedded import RedisServer
from tests.e2e.conftest import POLLER_ENV, ROUTER_ENV, SENDER_ENV, service_env
from tests.support.processes import Processes, ServiceProcess
from tests.support.sandbox import run_sandbox_process
from tools.lockinputs import dependencies_digest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
LOCK = ROOT / "requirements.lock"
INSTALL = ROOT / "tools" / "image-install.sh"
CORE = ("admission", "sender", "poller", "router")


def instructions() -> list[tuple[str, str]]:
    joined = re.sub(r"\\\n", " ", DOCKERFILE)
    found = []
    for line in (raw.strip() for raw in joined.splitlines()):
        if line and not line.startswith("#"):
            op, _, arg = line.partition(" ")
            found.append((op, arg.strip()))
    return found


def stage(name: str) -> list[tuple[str, str]]:
    current: str | None = None
    result = []
    for op, arg in instructions():
        if op == "FROM":
            current = arg.split(" AS ")[-1]
        elif current == name:
            result.append((op, arg))
    return result


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins() -> dict[str, list[str]]:
    """Package -> its hashes, from requirements.lock."""
    text = re.sub(r"\\\n\s*", " ", LOCK.read_text())
    result = {}
    for line in text.splitlines():
        if match := re.match(r"([A-Za-z0-9_.\-]+)==(\S+)(.*)", line):
            result[normalise(match.group(1))] = re.findall(r"--hash=sha256:([0-9a-f]{64})", line)
    return result


# --- the Dockerfile -----------------------------------------------------------------------


def test_base_image_is_pinned_by_digest() -> None:
    (arg,) = [a for op, a in instructions() if op == "ARG" and a.startswith("PYTHON_IMAGE=")]
    assert re.fullmatch(r"PYTHON_IMAGE=python:3\.11-slim@sha256:[0-9a-f]{64}", arg), arg
    assert [a for op, a in instructions() if op == "FROM"] == [
        "${PYTHON_IMAGE} AS builder",
        "${PYTHON_IMAGE} AS runtime",
    ]


def test_dependencies_are_a_layer_of_their_own_before_the_code() -> None:
    steps = [f"{op} {arg}" for op, arg in stage("builder")]
    lock = steps.index("COPY requirements.lock /src/requirements.lock")
    deps = steps.index("RUN image-install deps /opt/venv /src/requirements.lock")
    code = [i for i, s in enumerate(steps) if s.startswith("COPY services/")]
    assert lock < deps < code[0]
    assert steps[-1] == "RUN image-install app /opt/venv /src /app"
    # nothing installs the project itself (a second copy of the code in site-packages)
    assert not [s for s in steps if re.search(r"pip install (\.|/src)\b", s)]


def test_runtime_is_non_root_without_build_tools() -> None:
    runtime = stage("runtime")
    assert [arg for op, arg in runtime if op == "USER"] == ["10001:10001"]
    text = " ".join(arg for _, arg in runtime)
    assert "PYTHONDONTWRITEBYTECODE=1" in text
    for tool in ("apt-get install", "gcc", "build-essential", "pip install", "image-install"):
        assert tool not in text, tool


def ignored(path: str, patterns: list[str]) -> bool:
    """Whether .dockerignore keeps ``path`` out of the context (last match wins, ! re-adds)."""
    result = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        bare = pattern.removeprefix("!").rstrip("/")
        if fnmatch.fnmatch(path, bare) or path.startswith(bare + "/"):
            result = not negated
    return result


def test_every_copied_path_is_in_the_build_context() -> None:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    sources = [
        source
        for op, arg in instructions()
        if op == "COPY" and not arg.startswith("--from")
        for source in arg.split()[:-1]
    ]
    assert "requirements.lock" in sources and "tools/image-install.sh" in sources
    for source in sources:
        path = source.rstrip("/")
        assert (ROOT / path).exists(), source
        assert not ignored(path, patterns), f"{source} is excluded by .dockerignore"
    assert ignored("tools/lock-image.sh", patterns) and ignored("tests", patterns)


def test_runtime_holds_one_copy_of_the_code_and_oci_labels() -> None:
    runtime = stage("runtime")
    copies = [arg for op, arg in runtime if op == "COPY"]
    assert copies == ["--from=builder /opt/venv /opt/venv", "--from=builder /app /app"]
    labels = " ".join(arg for op, arg in runtime if op == "LABEL")
    for key in ("title", "description", "version", "revision"):
        assert f"org.opencontainers.image.{key}=" in labels, key
    assert ("USER", "10001:10001") in runtime
    assert runtime[-1] == ("CMD", '["python", "-m", "services.admission"]')


# --- requirements.lock --------------------------------------------------------------------


def test_the_lock_is_current_for_pyproject() -> None:
    first = LOCK.read_text().splitlines()[0]
    assert first.endswith(dependencies_digest()), (
        "requirements.lock is stale for pyproject.toml's dependencies: run tools/lock-image.sh"
    )


def test_every_runtime_dependency_is_pinned_with_hashes_and_nothing_else_is_direct() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    locked = pins()
    assert locked and all(locked.values()), [name for name, h in locked.items() if not h]
    for requirement in project["dependencies"]:
        name = normalise(re.match(r"[A-Za-z0-9_.\-]+", requirement).group(0))  # type: ignore[union-attr]
        assert name in locked, name
    for dev in project["optional-dependencies"]["dev"]:
        name = normalise(re.match(r"[A-Za-z0-9_.\-]+", dev).group(0))  # type: ignore[union-attr]
        assert name not in locked or name in {"pyyaml"}, f"dev dependency {name} in the image"


# --- the install steps, replayed ----------------------------------------------------------


def run_install(*args: str, timeout: float) -> None:
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run(
        ["sh", str(INSTALL), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]


def image_process(venv: Path, app: Path) -> type[ServiceProcess]:
    """Services run the way the image runs them: the image venv's python, in the app dir."""

    class ImageProcess(ServiceProcess):
        python = str(venv / "bin" / "python")
        cwd = app

    return ImageProcess


async def start_services(venv: Path, app: Path, tmp: Path) -> None:
    image = image_process(venv, app)
    redis = RedisServer().start()
    try:
        async with run_sandbox_process() as provider_url:
            base = service_env(redis.url, provider_url)
            extra = {"sender": SENDER_ENV, "poller": POLLER_ENV, "router": ROUTER_ENV}
            async with Processes(tmp / "logs", base) as stack:
                for name in CORE:
                    env = {**base, **extra.get(name, {})}
                    stack.services[name] = image(name, env, tmp / "logs")
                await asyncio.gather(*(stack.start(name) for name in CORE))
                for name in CORE:
                    assert await stack[name].metric("resetgate_redis_up") == 1.0, name
    finally:
        redis.stop()


def installed_packages(venv: Path) -> set[str]:
    installed = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "list", "--format=freeze"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return {normalise(line.split("==")[0]) for line in installed.splitlines() if "==" in line}


def check_code_install(venv: Path, app: Path) -> None:
    python = str(venv / "bin" / "python")
    where = subprocess.run(
        [python, "-c", "import services, shared; print(services.__file__, shared.__file__)"],
        capture_output=True,
        text=True,
        cwd="/",
        check=True,
        timeout=60,
    ).stdout.split()
    assert all(Path(path).is_relative_to(app) for path in where), where
    compiled = list(app.rglob("*.cpython-311.pyc"))
    sources = list(app.rglob("*.py"))
    assert len(compiled) >= len(sources), "not every module is byte-compiled"
    ops = subprocess.run(
        [str(venv / "bin" / "resetgate"), "ops", "--help"],
        capture_output=True,
        text=True,
        cwd="/",
        check=False,
        timeout=60,
    )
    assert ops.returncode == 0 and "status" in ops.stdout, ops.stderr


@pytest.fixture
def dependencies_of_this_checkout(tmp_path: Path) -> Path:
    """A fresh venv that sees this checkout's installed dependencies (not its code)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(site, "checkout-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv


async def test_the_code_step_replayed_runs_every_service(
    tmp_path: Path, dependencies_of_this_checkout: Path
) -> None:
    # Quick variant: the image's code step into a fresh venv whose dependencies are this
    # checkout's; the services start from the copy in app/, nowhere else.
    venv, app = dependencies_of_this_checkout, tmp_path / "app"
    run_install("app", str(venv), str(ROOT), str(app), timeout=120)
    check_code_install(venv, app)
    await start_services(venv, app, tmp_path)


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_the_whole_install_replayed_from_the_lock_runs_every_service(
    tmp_path: Path,
) -> None:
    venv, app = tmp_path / "venv", tmp_path / "app"
    run_install("deps", str(venv), str(LOCK), timeout=800)
    assert set(pins()) <= installed_packages(venv)
    run_install("app", str(venv), str(ROOT), str(app), timeout=120)
    check_code_install(venv, app)
    await start_services(venv, app, tmp_path)

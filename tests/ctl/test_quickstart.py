"""The README's quick start on a fresh clone, as a newcomer types it.

`git clone` of this repository into a temporary directory, `RESETGATE_HTTP_PORT=<free> make
run` in the background (reusing this test run's virtualenv: the clone's `.venv` points at it),
then every command the README's quick start and "Using it" show and every command the banner
prints, exactly as written (only OPERATION_ID is replaced by the id the commands answered),
each answer checked. The README has no other commands to run (`make test` is this suite).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from services.ctl import localpg
from tests.ctl.test_up import free_stack_port

ROOT = Path(__file__).resolve().parents[2]
# Under `make test` these name the outer make's jobserver and output options; a newcomer's
# `make run` has none (with --output-sync, the banner would wait in make's buffer forever).
MAKE_VARIABLES = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKE_TERMOUT", "MAKE_TERMERR")


def newcomer_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("RESETGATE_") and k not in MAKE_VARIABLES
    }
    return {**env, **extra}


def sh_blocks(text: str) -> list[list[str]]:
    """The ```sh blocks of a markdown text, as commands (continuation lines joined)."""
    blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
    return [[c.strip() for c in b.replace("\\\n", " ").splitlines() if c.strip()] for b in blocks]


def section(text: str, title: str) -> str:
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


@dataclass
class Clone:
    path: Path
    process: subprocess.Popen[str]
    banner: str

    def run(self, command: str, prelude: str = "") -> subprocess.CompletedProcess[str]:
        """``command`` in bash, in the clone, as a second terminal would run it."""
        return subprocess.run(
            ["bash", "-c", f"{prelude}\n{command}" if prelude else command],
            cwd=self.path,
            env=newcomer_env(),
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )


def read_banner(process: subprocess.Popen[str], timeout: float = 180) -> str:
    assert process.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while not lines or not lines[-1].startswith("Ctrl-C"):
        line = process.stdout.readline()
        if not line or time.monotonic() > deadline:
            raise AssertionError(f"make run printed no banner: {''.join(lines)}")
        lines.append(line)
    return "".join(lines)


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clone]:
    path = tmp_path_factory.mktemp("quickstart") / "resetgate"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(path)], check=True, timeout=120)
    (path / ".venv").symlink_to(Path(sys.prefix))
    # This venv already holds the runtime dependencies: let make know instead of reinstalling
    # (a pyproject.toml older than the venv's stamps, so the venv shared with this run is
    # left as it is; `make -t` creates the stamp only where it is missing).
    os.utime(path / "pyproject.toml", (0, 0))
    subprocess.run(
        ["make", "-s", "-t", "setup-run"],
        cwd=path,
        check=True,
        timeout=60,
        capture_output=True,
        env=newcomer_env(),
    )
    port = free_stack_port()
    process = subprocess.Popen(
        ["make", "run"],
        cwd=path,
        env=newcomer_env(RESETGATE_HTTP_PORT=str(port)),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        banner = read_banner(process)
        assert f"admission  http://127.0.0.1:{port}" in banner, banner
        yield Clone(path, process, banner)
    finally:
        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C in the first terminal
        process.communicate(timeout=90)
        shutil.rmtree(path, ignore_errors=True)
        # As root the archive's data lives outside the clone (services/ctl/localpg.py).
        shutil.rmtree(localpg.data_directory(path / ".run"), ignore_errors=True)


def get(url: str, data: bytes | None = None) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, data=data, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def until_accepted(clone: Clone, command: str, prelude: str = "") -> dict[str, object]:
    view: dict[str, object] = {}
    for _ in range(120):
        done = clone.run(command, prelude)
        assert done.returncode == 0, done.stderr
        view = json.loads(done.stdout)
        if view.get("state") == "accepted":
            return view
        time.sleep(0.5)
    raise AssertionError(f"never accepted: {view}")


@pytest.mark.timeout(600)
def test_the_banners_commands_work_as_printed(clone: Clone) -> None:
    commands = clone.banner.split("try:\n")[1].splitlines()
    curl_post, curl_get, status, oldest = (c.strip() for c in commands[:4])
    assert json.loads(clone.run(curl_post).stdout) == {"status": "received"}
    assert until_accepted(clone, curl_get)["account_id"] == "acct-1001"
    for command in (status, oldest):
        done = clone.run(command)
        assert done.returncode == 0, done.stderr
        assert done.stderr.startswith("redis: redis://127.0.0.1:"), done.stderr
        assert f"{clone.path}/.run/env" in done.stderr.splitlines()[0]
    path_line = re.search(r'export PATH="[^"]+:\$PATH"', clone.banner)
    assert path_line is not None
    done = clone.run("resetgate ops status", prelude=path_line.group(0))
    assert done.returncode == 0 and "PAUSED" in done.stdout, done.stderr


@pytest.mark.timeout(600)
def test_the_readmes_quick_start_works_as_written(clone: Clone) -> None:
    readme = (clone.path / "README.md").read_text()
    first, second = sh_blocks(section(readme, "Quick start"))
    assert first[0].startswith("make run") and first[1].startswith("make test")
    source, post, account, status, show, email = second
    assert clone.run(source).returncode == 0
    assert json.loads(clone.run(post, source).stdout) == {"status": "received"}
    view = until_accepted(clone, account, source)
    operation = str(view["operation_id"])
    done = clone.run(status, source)
    assert done.returncode == 0 and done.stderr.startswith("redis: redis://127.0.0.1:")
    assert re.search(r"^\s+0 no\s", done.stdout, re.M), done.stdout
    done = clone.run(show.replace("OPERATION_ID", operation), source)
    assert done.returncode == 0, done.stderr
    assert re.search(rf"operation_id\s+{operation}", done.stdout)
    assert re.search(r"state\s+accepted", done.stdout) and "None" not in done.stdout
    done = clone.run(email.replace("OPERATION_ID", operation), source)
    (message,) = json.loads(done.stdout)["data"]
    link = re.search(r"http://\S+/reset-password\?\S+", message["email"]["text"])
    assert link is not None
    follow_the_link(link.group(0))


def follow_the_link(link: str) -> None:
    """What a player does with the email: open the link, submit the form, once; opened
    again, the used link says so before any form."""
    status, page = get(link)
    assert status == 200 and "<form" in page
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(link).query))
    form = urllib.parse.urlencode({**query, "password": "new"}).encode()
    base = link.split("?")[0]
    first, again = get(base, form), get(base, form)
    assert first[0] == 200 and "Done" in first[1], first
    assert again[0] == 409 and "already been used" in again[1], again
    reopened = get(link)
    assert reopened[0] == 409 and "<form" not in reopened[1], reopened


def test_every_command_in_the_readme_is_one_these_tests_run() -> None:
    """Commands live in the two sections the tests below run, nowhere else in the README."""
    readme = (ROOT / "README.md").read_text()
    run = [sh_blocks(section(readme, title)) for title in ("Quick start", "Using it")]
    assert sh_blocks(readme) == [block for blocks in run for block in blocks]
    assert [len(block) for blocks in run for block in blocks] == [2, 6, 1, 5, 2]
    # The quick start's `make test` is not run here, being this suite: CI runs it, as written.
    make_test = run[0][0][1].split("#")[0].strip()
    assert make_test == "make test" and make_test in (ROOT / ".ci" / "run").read_text().splitlines()


@pytest.mark.timeout(600)
def test_the_readmes_internal_api_and_accounts_commands_work_as_written(clone: Clone) -> None:
    """Every command of "Using it" in the second terminal, after the quick start's `. .run/env`:
    only OPERATION_ID is replaced (by the id the commands answered)."""
    readme = (clone.path / "README.md").read_text()
    source = sh_blocks(section(readme, "Quick start"))[1][0]
    blocks = sh_blocks(section(readme, "Using it"))
    public, internal, accounts = blocks[0], blocks[1], blocks[2]
    assert json.loads(clone.run(public[0], source).stdout) == {"status": "received"}
    bearer, create, account, one, oldest = internal
    answers = [clone.run(command, f"{source}\n{bearer}") for command in (create, account)]
    created, seen = (json.loads(a.stdout) for a in answers)
    assert created["operation_id"] == seen["operation_id"]
    one = one.replace("OPERATION_ID", created["operation_id"])
    assert json.loads(clone.run(one, f"{source}\n{bearer}").stdout)["attempt_ledger"] is not None
    listed = json.loads(clone.run(oldest, f"{source}\n{bearer}").stdout)
    assert "operations" in listed
    imports, add = accounts  # as written, in the second terminal: nothing on PATH, no file made
    seeded = (clone.path / ".run" / "demo-accounts.csv").read_text().count("\n") - 1
    done = clone.run(imports, source)
    assert done.returncode == 0 and f"imported {seeded} account(s)" in done.stdout, done.stderr
    done = clone.run(add, source)
    assert done.returncode == 0 and "added account acct-9" in done.stdout, done.stderr

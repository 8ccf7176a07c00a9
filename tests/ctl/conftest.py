"""One `resetgate up --provider postmark` stack for the tests that only use a running one (its
banner, its env file, a bounce, the inbox): package-scoped, so the parallel pass runs those
tests on one worker (tests/conftest.py) and the stack starts once, not once per test."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.ctl.test_up import child_env, free_stack_port


@dataclass
class Stack:
    port: int
    directory: Path  # its --dir: the env file, the logs
    banner: str


def banner_of(process: subprocess.Popen[str]) -> str:
    """What the stack printed up to its "Ctrl-C" line; AssertionError with its stderr if it
    exited first (pytest-timeout bounds the wait)."""
    assert process.stdout is not None and process.stderr is not None
    lines: list[str] = []
    while not any(line.startswith("Ctrl-C") for line in lines):
        line = process.stdout.readline()
        if not line:
            raise AssertionError(f"resetgate up exited before its banner: {process.stderr.read()}")
        lines.append(line)
    return "".join(lines)


def up_in_background(directory: Path, *args: str) -> tuple[int, subprocess.Popen[str], str]:
    """As tests.ctl.test_up.up_on_free_ports, outside an event loop (a package-wide fixture
    outlives each test's loop): a drawn port another worker took is drawn again."""
    for _ in range(3):
        port = free_stack_port()
        command = ["up", "--dir", str(directory), "--port", str(port), "--no-archive", *args]
        process = subprocess.Popen(
            [sys.executable, "-m", "services.ctl.main", *command],
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            return port, process, banner_of(process)
        except AssertionError as error:
            if "already in use" not in str(error):
                raise
        except BaseException:
            stop(process)
            raise
    raise AssertionError("three drawn blocks of ports were taken before the stack bound them")


def stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)  # the terminal's Ctrl-C
    _, stderr = process.communicate(timeout=90)
    assert process.returncode == 0, stderr


@pytest.fixture(scope="package")
def postmark_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    directory = tmp_path_factory.mktemp("postmark-stack")
    port, process, banner = up_in_background(directory, "--provider", "postmark")
    try:
        yield Stack(port, directory, banner)
    finally:
        stop(process)

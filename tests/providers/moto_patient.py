"""moto's server, started as a process by the test that needs it and waited for with a
deadline: on a loaded machine its import alone took longer than a fixed number of tries."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator

import aiohttp
import pytest

from services.ctl.embedded import free_port

STARTUP_SECONDS = 120.0


def _wait_up(url: str, child: subprocess.Popen[bytes]) -> None:
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise RuntimeError(f"moto server exited with {child.returncode}")
        try:
            with urllib.request.urlopen(url + "/moto-api/", timeout=2):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(0.1)
    raise RuntimeError(f"moto server did not start within {STARTUP_SECONDS:g} s")


@contextlib.contextmanager
def moto(**env: str) -> Iterator[str]:
    port = free_port()
    child = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **env},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_up(url, child)
        yield url
    finally:
        child.terminate()
        child.wait(timeout=10)


@pytest.fixture(scope="module")
def patient_moto(aws_env: None) -> Iterator[str]:
    with moto() as url:
        yield url


@pytest.fixture
async def moto_url(patient_moto: str) -> AsyncIterator[str]:
    # Every test starts from an empty SES.
    async with aiohttp.ClientSession() as session, session.post(patient_moto + "/moto-api/reset"):
        pass
    yield patient_moto

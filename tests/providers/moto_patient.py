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
from tests.support.processes import START_TIMEOUT, listens

# The adapter's timeouts against moto: its answers come later than a scripted provider's
# (beside a CPU hog, after the 2 s those get), and a call without an answer is ambiguous.
TIMEOUTS = {"connect_timeout": 2.0, "total_timeout": 20.0}


def _wait_up(port: int, child: subprocess.Popen[bytes]) -> None:
    import urllib.error
    import urllib.request

    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise RuntimeError(f"moto server exited with {child.returncode}")
        with (
            contextlib.suppress(urllib.error.URLError, OSError),
            urllib.request.urlopen(url + "/moto-api/", timeout=2),
        ):
            # Only its answer counts (another process may have taken the port first).
            if listens(child.pid, port):
                return
        time.sleep(0.1)
    raise RuntimeError(f"moto server did not start within {START_TIMEOUT:g} s")


@contextlib.contextmanager
def moto(**env: str) -> Iterator[str]:
    port = free_port()
    child = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **env},
    )
    try:
        _wait_up(port, child)
        yield f"http://127.0.0.1:{port}"
    finally:
        child.terminate()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            # Beside a CPU hog moto took longer than 10 s to stop: its shutdown is no test's
            # subject, and a child left running fails the worker's next test (ResourceWarning).
            child.kill()
            child.wait()


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

"""The console is served only on its own listener: the public port has no /console/ at all,
and without RESETGATE_CONSOLE_PORT there is no console anywhere."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from services.ctl.embedded import free_port
from tests.admission.helpers import admission_process

PATHS = ("/console/", "/console/sign-in", "/console/oldest", "/console/static/console.css")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _status(url: str) -> int:
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(url, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


def test_console_is_absent_from_the_public_listener(redis_server: Any, tmp_path: Path) -> None:
    port = free_port()
    with admission_process(
        redis_server.url, tmp_path / "admission.log", RESETGATE_CONSOLE_PORT=str(port)
    ) as (public, _):
        for path in PATHS:
            assert _status(public + path) == 404, path
        console = f"http://127.0.0.1:{port}"
        assert _status(console + "/console/") == 303
        assert _status(console + "/console/sign-in") == 200
        # No API there either: without a session, anything else is sent to sign in.
        assert _status(console + "/v1/password-resets") == 303


def test_no_console_without_its_port(redis_server: Any, tmp_path: Path) -> None:
    with admission_process(redis_server.url, tmp_path / "admission.log") as (public, _):
        for path in PATHS:
            assert _status(public + path) == 404, path
        log = (tmp_path / "admission.log").read_text()
        assert '"console":false' in log and "console listening" not in log
        with pytest.raises(urllib.error.URLError):
            urllib.request.urlopen(f"http://127.0.0.1:{free_port()}/console/", timeout=2)

"""A malformed RESETGATE_REDIS_URL (``127.0.0.1:6379``, the scheme left out) is one line naming
the setting and the form it expects, from every service and `resetgate ops`: it was a 25-line
redis-py traceback with the URL misprinted. The opposite harm: a well-formed URL is not refused."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from shared.settings import REDIS_URL_FORM, RedisSettings

COMMANDS = {
    "admission": ["-m", "services.admission"],
    "sender": ["-m", "services.sender"],
    "poller": ["-m", "services.poller"],
    "router": ["-m", "services.router"],
    "ops": ["-m", "services.ctl.main", "ops", "status"],
}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_url_without_its_scheme_is_one_line_naming_the_setting(name: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESETGATE_")}
    env.update(
        RESETGATE_REDIS_URL="secretpw@127.0.0.1:6379",
        RESETGATE_TOKEN_KEYS="k:" + "s" * 40,
        RESETGATE_INTERNAL_API_TOKEN="t" * 24,
    )
    done = subprocess.run(
        [sys.executable, *COMMANDS[name]],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode != 0
    assert len(lines) == 1, done.stderr
    assert "RESETGATE_REDIS_URL: not a Redis URL: expected " + REDIS_URL_FORM in lines[0]
    assert "secretpw" not in done.stderr


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:6379/0",
        "rediss://:pw@cache.internal:6380/1",
        "redis://localhost",
        "unix:///run/redis.sock",
    ],
)
def test_a_well_formed_url_is_accepted(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESETGATE_REDIS_URL", url)
    assert RedisSettings().redis_url == url

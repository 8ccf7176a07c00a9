"""What stays at rest or in the clear (issue 34, item 8): a Redis URL's password, a pause
reason, an operator's reason.

- A malformed RESETGATE_REDIS_URL whose password holds an unencoded "/" made redis-py quote
  the rest of the host part as the port (the password's head) in a traceback; now it is one
  line naming the setting, and the URL is never quoted. A percent-encoded password still
  parses (what the check could break).
- `resetgate up` printed the Redis URL with its password in its banner.
- A provider's pause reason kept URLs and token-shaped strings and showed them in the
  console; an operator's reason kept terminal and bidi control characters.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from services.ctl import banner
from shared.actions import clean_reason
from shared.control import sanitise
from shared.redis import display_url
from shared.settings import RedisSettings, redis_url_problem
from tests.conftest import TEST_TOKEN_KEYS

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "s3cr/etPW"  # an unencoded "/" ends the host part early


@pytest.mark.parametrize("service", ["admission", "sender"])
def test_a_malformed_url_with_a_password_is_one_line_without_it(service: str) -> None:
    env = {
        **os.environ,
        "RESETGATE_REDIS_URL": f"redis://:{PASSWORD}@127.0.0.1:6379/0",
        "RESETGATE_TOKEN_KEYS": TEST_TOKEN_KEYS,
        "RESETGATE_INTERNAL_API_TOKEN": "x" * 32,
    }
    done = subprocess.run(
        [sys.executable, "-m", f"services.{service}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if "RESETGATE_REDIS_URL" in line]
    assert len(lines) == 1 and "does not parse" in lines[0], done.stderr
    assert "Traceback" not in done.stderr
    assert "s3cr" not in done.stderr + done.stdout and "etPW" not in done.stderr + done.stdout


def test_a_percent_encoded_password_parses_and_is_never_displayed() -> None:
    url = "redis://:s3cr%2FetPW@127.0.0.1:6379/0"
    assert redis_url_problem(url) == ""
    assert RedisSettings(redis_url=url).redis_url == url
    assert display_url(url) == "redis://127.0.0.1:6379/0"
    assert "s3cr" not in display_url(f"redis://:{PASSWORD}@127.0.0.1:6379/0")


def test_the_up_banner_never_prints_the_redis_password(tmp_path: Path) -> None:
    env = {
        "RESETGATE_REDIS_URL": "redis://:hunter2secret@127.0.0.1:6390/0",
        "RESETGATE_INTERNAL_API_TOKEN": "t" * 32,
        "RESETGATE_PROVIDER_KIND": "http",
        "RESETGATE_PROVIDER_NAME": "default",
        "RESETGATE_PROVIDER_URL": "http://127.0.0.1:6391",
    }
    ports = {"admission": 6380, "console": 6386}
    shown = banner.text(env, ports, tmp_path, embedded=False)
    assert "hunter2secret" not in shown
    assert "redis://127.0.0.1:6390/0" in shown  # still says which Redis


def test_a_pause_reason_keeps_no_url_or_token_and_keeps_the_words() -> None:
    reason = (
        "Account suspended, see https://provider.example/acct?sig=abc for details; "
        "server token 7a1c6b2e-1d4f-4b6a-9c0e-1f2a3b4c5d6e rejected"
    )
    clean = sanitise(reason)
    assert "provider.example" not in clean and "7a1c6b2e" not in clean
    assert clean.startswith("Account suspended, see [url] for details; server token [token]")
    assert sanitise("Inactive recipient (HTTP 406, ErrorCode 406)") == (
        "Inactive recipient (HTTP 406, ErrorCode 406)"
    )


def test_an_operator_reason_keeps_no_terminal_or_bidi_controls() -> None:
    reason = "player asked \x1b[2J\x1b]0;owned\x07 to wait \u202egnp.exe\u202c \u2066x\u2069"
    clean = clean_reason(reason)
    assert not any(c in clean for c in "\x1b\x07\u202e\u202c\u2066\u2069")
    assert clean.startswith("player asked") and "to wait" in clean

"""``resetgate accounts import`` / ``add`` against a real Redis."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis as sync_redis

from services.ctl import accounts
from services.ctl.embedded import RedisServer
from shared.keys import directory_account, directory_login


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="resetgate")
    accounts.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(list(argv))
    code: int = args.handler(args)
    return code


@pytest.fixture
def store(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[sync_redis.Redis]:
    monkeypatch.setenv("RESETGATE_REDIS_URL", redis_server.url)
    client = sync_redis.Redis.from_url(redis_server.url, decode_responses=True)
    client.flushall()
    yield client
    client.close()


def test_import_writes_every_row(
    store: sync_redis.Redis, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = ["login,account_id,email,locale"] + [
        f"Player{i}@Example.com,acct-{i},p{i}@example.com,{'de' if i % 2 else ''}"
        for i in range(1000)
    ]
    csv_file = tmp_path / "accounts.csv"
    csv_file.write_text("\n".join(rows) + "\n")
    assert run("accounts", "import", str(csv_file)) == 0
    out = capsys.readouterr()
    assert out.out.strip() == "imported 1000 account(s)"
    assert store.get(directory_login("player7@example.com")) == "acct-7"  # logins are normalised
    assert store.hgetall(directory_account("acct-7")) == {"email": "p7@example.com", "locale": "de"}
    assert store.hget(directory_account("acct-8"), "locale") == "en"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("alice,acct-1,alice@example.com\nbob,acct-2\n", "line 2: expected login,account_id"),
        (
            "alice,acct-1,alice@example.com\nbob,acct-2,bob-at-example.com\n",
            "line 2: the email column is not one mailbox",
        ),
        ("login,account_id,email\nalice,acct 1,alice@example.com\n", "line 2: account_id must"),
        ("a,b,c,d,e,f\n", "line 1: expected"),
    ],
)
def test_a_bad_row_names_its_line_never_the_address_and_writes_nothing(
    store: sync_redis.Redis,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: str,
    message: str,
) -> None:
    csv_file = tmp_path / "accounts.csv"
    csv_file.write_text(content)
    assert run("accounts", "import", str(csv_file)) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: " + message)
    assert "@" not in err and "example" not in err
    assert store.dbsize() == 0


def test_unreadable_files_are_clear_errors(
    store: sync_redis.Redis, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("accounts", "import", str(tmp_path / "missing.csv")) == 1
    assert "cannot read" in capsys.readouterr().err
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"\xff\xfe\x00a,b,c\n")
    assert run("accounts", "import", str(binary)) == 1
    assert "not UTF-8" in capsys.readouterr().err


def test_add_one_account(store: sync_redis.Redis, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("accounts", "add", "Carol", "acct-carol", "carol@example.com", "--locale", "fr") == 0
    assert capsys.readouterr().out.strip() == "added account acct-carol"
    assert store.get(directory_login("carol")) == "acct-carol"
    assert store.hgetall(directory_account("acct-carol")) == {
        "email": "carol@example.com",
        "locale": "fr",
    }
    assert run("accounts", "add", "dave", "acct-dave", "no-address") == 1
    assert run("accounts", "add", "dave", "bad id", "d@example.com") == 1
    assert "@" not in capsys.readouterr().err


def test_logins_that_normalise_to_one_key_for_two_accounts_are_refused(
    store: sync_redis.Redis, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 10.8: ``straße`` and ``STRASSE`` are one directory key once case-folded; the
    second row silently took the first one's login over. Now the import names both lines
    (never the logins, which may be addresses) and writes nothing."""
    csv_file = tmp_path / "accounts.csv"
    csv_file.write_text(
        "login,account_id,email\nstraße,acct-1,a@example.com\n"
        "bob,acct-2,b@example.com\nSTRASSE,acct-3,c@example.com\n"
    )
    assert run("accounts", "import", str(csv_file)) == 1
    err = capsys.readouterr().err
    assert "line 4" in err and "line 2" in err
    assert "stra" not in err.lower()
    assert store.dbsize() == 0
    # The same login twice for the same account is no collision.
    csv_file.write_text("Carol,acct-4,c@example.com\ncarol,acct-4,c@example.com\n")
    assert run("accounts", "import", str(csv_file)) == 0

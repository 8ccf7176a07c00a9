"""``resetgate accounts``: fill the Redis account directory (local runs, tests, demos).

Errors name the CSV line and the problem, never the row's content: the email column holds
real addresses, and terminals end up in tickets and screenshots.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Sequence
from pathlib import Path

from services.ctl.stack import use_local_stack, with_redis
from shared.directory import Account, ImportError_, RedisDirectory, normalise_login, read_csv
from shared.ids import ACCOUNT_ID_RULE, valid_account_id
from shared.redis import RedisClient
from shared.settings import CommonSettings, load

BATCH = 200  # accounts per pipeline: one round trip each, a bounded request size


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    accounts = subparsers.add_parser("accounts", help="manage the Redis account directory")
    sub = accounts.add_subparsers(dest="accounts_command", required=True)
    imp = sub.add_parser(
        "import", help="import login,account_id,email[,locale[,brand]] rows from a CSV"
    )
    imp.add_argument("file", type=Path, help="CSV file (a 'login,...' header line is optional)")
    imp.set_defaults(handler=import_command)
    add = sub.add_parser("add", help="add or replace one account")
    add.add_argument("login")
    add.add_argument("account_id")
    add.add_argument("email")
    add.add_argument("--locale", default="en", help="BCP 47 tag (docs/templates.md)")
    add.add_argument("--brand", default="", help="the game, for a studio with several")
    add.set_defaults(handler=add_command)


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 1


def check_rows(rows: Sequence[tuple[str, Account]], line_numbers: Sequence[int]) -> str | None:
    """The first problem read_csv does not catch, or None: an account id we could not route,
    or two logins that are one directory key once normalised (``straße`` and ``STRASSE``),
    for different accounts: the second would silently take over the first."""
    seen: dict[str, tuple[int, str]] = {}
    for (login, account), number in zip(rows, line_numbers, strict=True):
        if not valid_account_id(account.account_id):
            return f"line {number}: account_id must be {ACCOUNT_ID_RULE}"
        key = normalise_login(login)
        first = seen.setdefault(key, (number, account.account_id))
        if first[1] != account.account_id:
            return (
                f"line {number}: its login is line {first[0]}'s once normalised (case "
                "folded), for another account; a login must name one account"
            )
    return None


def _data_line_numbers(lines: list[str]) -> list[int]:
    """CSV line numbers of the rows read_csv returns (it skips blanks and the header)."""
    numbers = []
    for number, row in enumerate(csv.reader(lines), start=1):
        if not row or (number == 1 and row[0].strip().lower() == "login"):
            continue
        numbers.append(number)
    return numbers


def _read(path: Path) -> tuple[list[tuple[str, Account]], str | None]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        return [], f"cannot read {path}: {error.strerror}"
    except UnicodeDecodeError:
        return [], f"{path} is not UTF-8 text"
    try:
        rows = read_csv(lines)
        numbers = _data_line_numbers(lines)
    except ImportError_ as error:
        return [], str(error)
    except csv.Error as error:
        return [], f"{path} is not readable CSV ({error})"
    return rows, check_rows(rows, numbers)


def _write(rows: Sequence[tuple[str, Account]]) -> None:
    source = use_local_stack()
    settings = load(CommonSettings)

    async def write(client: RedisClient) -> None:
        directory = RedisDirectory(client)
        for start in range(0, len(rows), BATCH):
            batch = rows[start : start + BATCH]
            await directory.add_many(batch)

    with_redis(settings, source, write)


def import_command(args: argparse.Namespace) -> int:
    rows, problem = _read(args.file)
    if problem is not None:
        return _fail(problem)  # nothing is written unless every row is valid
    _write(rows)
    print(f"imported {len(rows)} account(s)")
    return 0


def add_command(args: argparse.Namespace) -> int:
    login, account_id, email = args.login.strip(), args.account_id.strip(), args.email.strip()
    if not login:
        return _fail("login must not be empty")
    if not valid_account_id(account_id):
        return _fail(f"account_id must be {ACCOUNT_ID_RULE}")
    if "@" not in email:
        return _fail("the email argument holds no address")
    account = Account(account_id, email, args.locale.strip() or "en", args.brand.strip())
    _write([(login, account)])
    print(f"added account {account_id}")
    return 0

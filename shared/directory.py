"""The account directory: login -> account, and account -> where to send.

The directory is the studio's, not resetgate's: the Redis one (keys ``rgdir:*``) stands in
for it in local runs and tests; production points ``RESETGATE_DIRECTORY_URL`` at the
studio's account service. Addresses are read at send time and never copied into the
operation store.
"""

from __future__ import annotations

import asyncio
import csv
import inspect
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

import aiohttp
from yarl import URL

from shared import keys, mailbox
from shared.ids import valid_account_id
from shared.redis import RedisClient
from shared.settings import DirectorySettings


@dataclass(frozen=True, slots=True)
class Account:
    account_id: str
    email: str
    locale: str = "en"  # a BCP 47 tag (shared.emails.locales negotiates it)
    brand: str = ""  # the game or title, for a studio whose games share one directory

    def __repr__(self) -> str:  # an address must never reach a log through a repr
        return f"Account(account_id={self.account_id!r})"


class DirectoryError(RuntimeError):
    """The directory could not answer (timeout, 5xx, bad JSON); not the same as 'unknown'."""


class Directory(Protocol):
    async def lookup_login(self, login: str) -> Account | None: ...
    async def get_account(self, account_id: str) -> Account | None: ...
    def asked(self, account_id: str) -> Asked | None: ...


def normalise_login(login: str) -> str:
    return login.strip().casefold()


class RedisDirectory:
    def __init__(self, client: RedisClient) -> None:
        self.client = client

    async def lookup_login(self, login: str) -> Account | None:
        account_id = await self.client.get(keys.directory_login(normalise_login(login)))
        # A miss still reads an (absent) account hash, so an unknown login costs the same
        # round trips as a known one: the public endpoint's timing must not tell them apart.
        account = await self.get_account(str(account_id) if account_id else "")
        return account if account_id else None

    async def get_account(self, account_id: str) -> Account | None:
        return _account(account_id, await self.client.hgetall(keys.directory_account(account_id)))

    def asked(self, account_id: str) -> Asked | None:
        """The account's read, written now; None on a client that writes a command only
        once it is awaited (only a pipelined link, shared/fastredis.py, writes it at once)."""
        raw = self.client.hgetall(keys.directory_account(account_id))
        if not isinstance(raw, asyncio.Future):
            if inspect.iscoroutine(raw):
                raw.close()
            return None
        return Asked(account_id, raw)

    async def add(self, login: str, account: Account) -> None:
        await self.add_many([(login, account)])

    async def add_many(self, rows: Sequence[tuple[str, Account]]) -> None:
        """Write every (login, account) in one pipeline: one connection and one round trip
        (on Cluster, one per node), so an import never queues for the pool's connections."""
        async with self.client.pipeline(transaction=False) as pipe:
            for login, account in rows:
                key = keys.directory_account(account.account_id)
                pipe.hset(key, mapping={"email": account.email, "locale": account.locale})
                if account.brand:
                    pipe.hset(key, "brand", account.brand)
                else:  # a field at its default is not stored
                    pipe.hdel(key, "brand")
                pipe.set(keys.directory_login(normalise_login(login)), account.account_id)
            await pipe.execute()


class Asked:
    """An account read already on its way: awaited later (the sender begins its attempt in
    the same round trip), or dropped."""

    def __init__(self, account_id: str, reply: asyncio.Future[Any]) -> None:
        self.account_id = account_id
        self._reply = reply

    async def account(self) -> Account | None:
        return _account(self.account_id, await self._reply)

    def drop(self) -> None:
        """Not needed after all: its reply, or its error, is let go."""
        if self._reply.done():
            if not self._reply.cancelled():
                self._reply.exception()  # retrieved: asyncio would log one left unread
        else:
            self._reply.cancel()


def _account(account_id: str, raw: Any) -> Account | None:
    if not raw:
        return None
    return Account(
        account_id,
        str(raw["email"]),
        str(raw.get("locale") or "en"),
        str(raw.get("brand") or ""),
    )


class HttpDirectory:
    """``GET {url}/accounts/lookup?login=…`` and ``GET {url}/accounts/{id}``: 200 JSON or 404.

    Every path segment is percent-encoded and the URL is sent as built (no normalising), an
    id that is not an account id's shape is never sent, and a redirect is an error, never
    followed: a value a player chose must not pick the directory route, and a 3xx must not
    send our request somewhere else.
    """

    def __init__(self, session: aiohttp.ClientSession, base_url: str, timeout: float) -> None:
        self.session = session
        self.base_url = base_url.rstrip("/")
        self.timeout = aiohttp.ClientTimeout(total=timeout)

    def url(self, *segments: str, query: dict[str, str] | None = None) -> URL:
        path = "".join("/" + quote(segment, safe="") for segment in segments)
        url = URL(self.base_url + path, encoded=True)
        return url.update_query(query) if query else url

    async def _get(self, url: URL) -> Account | None:
        try:
            # Never follow a redirect: the answer names where an email goes.
            async with self.session.get(
                url, timeout=self.timeout, allow_redirects=False
            ) as response:
                if response.status == 404:
                    return None
                if response.status != 200:
                    raise DirectoryError(f"directory answered {response.status}")
                body = await response.json(content_type=None)
                locale, brand = str(body.get("locale") or "en"), str(body.get("brand") or "")
                return Account(str(body["account_id"]), str(body["email"]), locale, brand)
        except (aiohttp.ClientError, TimeoutError) as error:
            raise DirectoryError(f"directory unreachable: {type(error).__name__}") from None
        except (ValueError, KeyError, TypeError):
            raise DirectoryError("directory answered malformed JSON") from None

    async def lookup_login(self, login: str) -> Account | None:
        return await self._get(self.url("accounts", "lookup", query={"login": login}))

    async def get_account(self, account_id: str) -> Account | None:
        if not valid_account_id(account_id):
            return None  # no account has this id; it must not become a path
        return await self._get(self.url("accounts", account_id))

    def asked(self, account_id: str) -> Asked | None:
        """Never asked ahead: no Redis round trip to share."""
        return None


def directory_for(
    settings: DirectorySettings, client: RedisClient, session: aiohttp.ClientSession
) -> Directory:
    """The studio's directory over HTTP when ``RESETGATE_DIRECTORY_URL`` is set (through
    ``session``), else the Redis stand-in."""
    if settings.directory_url:
        return HttpDirectory(session, settings.directory_url, settings.directory_timeout_seconds)
    return RedisDirectory(client)


@asynccontextmanager
async def open_directory(
    settings: DirectorySettings, client: RedisClient
) -> AsyncIterator[Directory]:
    """:func:`directory_for` with a session of its own, closed on exit."""
    async with aiohttp.ClientSession() as session:
        yield directory_for(settings, client, session)


class ImportError_(ValueError):
    """A CSV row that cannot be imported; names the line, never the address."""


def read_csv(lines: Iterable[str]) -> list[tuple[str, Account]]:
    """Parse ``login,account_id,email[,locale[,brand]]`` (header optional)."""
    rows: list[tuple[str, Account]] = []
    for number, row in enumerate(csv.reader(lines), start=1):
        if not row or (number == 1 and row[0].strip().lower() == "login"):
            continue
        if len(row) not in (3, 4, 5) or not all(cell.strip() for cell in row[:3]):
            raise ImportError_(f"line {number}: expected login,account_id,email[,locale[,brand]]")
        problem = mailbox.problem(row[2].strip())
        if problem:
            raise ImportError_(f"line {number}: the email column {problem}")
        locale = row[3].strip() if len(row) >= 4 and row[3].strip() else "en"
        brand = row[4].strip() if len(row) == 5 else ""
        rows.append((row[0].strip(), Account(row[1].strip(), row[2].strip(), locale, brand)))
    return rows

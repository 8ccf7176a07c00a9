"""The console's account page (where its search sends an account id) reads Redis first and
the archive for what Redis no longer holds, says which store answered each row, and says
what became of the archive's part: read, not configured, or not answering; the operation
page's "read from" notice leaves its timeline's words alone. A real Redis and a real
PostgreSQL (tests/archive/conftest.py)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
from aiohttp.test_utils import TestClient, TestServer

from services.admission.console.app import create_console_app
from services.ctl.embedded import free_port
from shared import clock
from shared.archive import maybe_pool
from shared.ids import operation_created_ms
from shared.redis import create_client
from shared.scripts.attempts import BeginAttempt, Finalisation, FinaliseAttempt
from tests.archive.conftest import Settler
from tests.archive.helpers import archived_and_expired
from tests.console.helpers import console_settings, sign_in

ROW = re.compile(r"<tr>(.*?)</tr>", re.S)
CELL = re.compile(r"<td[^>]*>(.*?)</td>", re.S)
TAG = re.compile(r"<[^>]+>")


@asynccontextmanager
async def console_page(settler: Settler, dsn: str, path: str) -> AsyncIterator[str]:
    settings = console_settings(settler.settings.redis_url, archive_dsn=dsn, partitions=4)
    store = create_client(settings)
    try:
        async with maybe_pool(settings) as pool:
            server = TestServer(create_console_app(settings, store, pool), host="127.0.0.1")
            async with TestClient(server, cookie_jar=aiohttp.DummyCookieJar()) as http:
                headers = await sign_in(http)
                response = await http.get(path, headers=headers)
                assert response.status == 200
                yield await response.text()
    finally:
        await store.aclose()


def rows(page: str) -> list[tuple[str, str, str]]:
    """(which, operation id, read from) of each listed operation, top to bottom."""
    found = []
    for body in ROW.findall(page):
        cells = [TAG.sub("", cell).strip() for cell in CELL.findall(body)]
        if cells:
            found.append((cells[0], cells[1], cells[-1]))
    return found


async def test_the_account_page_lists_what_redis_let_go_from_the_archive(
    settler: Settler, archive_dsn: str
) -> None:
    account = "acct-page"
    ops = [await settler.settle(account, outcome) for outcome in ("failed", "expired")]
    await archived_and_expired(settler, archive_dsn, *ops)
    newest = await settler.settle(account, "failed")  # in Redis, not archived yet
    ops.sort(key=lambda op: (operation_created_ms(op), op))
    async with console_page(settler, archive_dsn, f"/console/accounts/{account}") as page:
        assert "Redis and the archive were read" in page
        assert rows(page) == [
            ("last", newest, "Redis"),
            ("earlier", ops[1], "archive"),
            ("earlier", ops[0], "archive"),
        ]


async def test_without_an_archive_the_page_lists_redis_only_and_says_so(
    settler: Settler, archive_dsn: str
) -> None:
    account = "acct-page-none"
    old = await settler.settle(account, "failed")
    await archived_and_expired(settler, archive_dsn, old)
    newest = await settler.settle(account, "failed")
    async with console_page(settler, "", f"/console/accounts/{account}") as page:
        assert "No archive is configured" in page
        assert rows(page) == [("last", newest, "Redis")]


async def test_an_archive_that_does_not_answer_leaves_redis_listed_and_says_so(
    settler: Settler, archive_dsn: str
) -> None:
    account = "acct-page-down"
    old = await settler.settle(account, "failed")
    await archived_and_expired(settler, archive_dsn, old)
    newest = await settler.settle(account, "failed")
    nowhere = f"postgresql://postgres@127.0.0.1:{free_port()}/resetgate"
    async with console_page(settler, nowhere, f"/console/accounts/{account}") as page:
        # Not "no operation on record": the page says the archive was not read.
        assert "The archive did not answer" in page
        assert rows(page) == [("last", newest, "Redis")]


async def test_the_operation_pages_timeline_still_says_where_the_retry_wait_came_from(
    settler: Settler, archive_dsn: str
) -> None:
    """The page's "read from" notice once took the name of the Retry-After sources' words,
    and the timeline showed "delta" instead of what it means."""
    operation_id = await settler.admit("acct-throttled")
    now, attempt = clock.now_ms(), f"at-{operation_id}"
    await BeginAttempt(
        operation_id=operation_id,
        attempt_id=attempt,
        now=now,
        lease_ms=60_000,
        max_attempts=6,
        consumer="test",
        entry_id="",
        retention_ms=settler.settings.settled_retention_ms,
    ).run(settler.redis)
    throttled = Finalisation(
        outcome="throttled",
        http_status=429,
        next_state="deferred",
        retry_at=now + 30_000,
        retry_after_source="delta",
    )
    await FinaliseAttempt(
        operation_id=operation_id,
        attempt_id=attempt,
        now=now,
        entry_id="",
        result=throttled,
        retention_ms=settler.settings.settled_retention_ms,
    ).run(settler.redis)
    async with console_page(settler, archive_dsn, f"/console/operations/{operation_id}") as page:
        assert "Read from Redis" in page
        assert "the provider said how many seconds to wait" in page

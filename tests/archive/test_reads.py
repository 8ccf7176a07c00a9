"""Reads fall back: what Redis has let go (archived, then expired after the tail) is read
from the archive, by the internal API, the account's history and `resetgate ops show`, and
each says where it read. An archive that does not answer is a 503, never "no such
operation"; without an archive, what Redis lacks is not found."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
from aiohttp.test_utils import TestClient, TestServer

from services.admission.console.app import create_console_app
from services.ctl.embedded import free_port
from shared import codec
from shared.archive import maybe_pool
from shared.ids import operation_created_ms
from shared.redis import create_client
from tests.admission.helpers import BEARER, admission_settings, serving
from tests.archive.conftest import Settler
from tests.archive.helpers import archived_and_expired
from tests.console.helpers import console_settings, get_text, sign_in

OPERATION = "/internal/v1/recovery-operations/{}"
HISTORY = "/internal/v1/accounts/{}/recovery-operations"


@asynccontextmanager
async def api(settler: Settler, dsn: str) -> AsyncIterator[TestClient[Any, Any]]:
    settings = admission_settings(settler.settings.redis_url, archive_dsn=dsn, partitions=4)
    async with maybe_pool(settings) as pool, serving(settings, archive=pool) as http:
        yield http


async def get(http: TestClient[Any, Any], path: str, **query: Any) -> tuple[int, Any]:
    response = await http.get(path, headers=BEARER, params=query)
    return response.status, await response.json()


async def test_the_operation_view_reads_the_archive_for_what_redis_let_go(
    settler: Settler, archive_dsn: str
) -> None:
    old = await settler.settle("acct-view", "failed")
    await archived_and_expired(settler, archive_dsn, old)
    recent = await settler.settle("acct-view-2")
    async with api(settler, archive_dsn) as http:
        status, body = await get(http, OPERATION.format(old))
        assert status == 200, body
        assert (body["source"], body["state"], body["reason"]) == (
            "archive",
            "failed",
            "recipient_refused",
        )
        assert [a["attempt_id"] for a in body["attempt_ledger"]] == [f"at-{old}"]
        status, body = await get(http, OPERATION.format(recent))
        assert (status, body["source"]) == (200, "redis")


async def test_without_an_archive_what_redis_let_go_is_not_found(
    settler: Settler, archive_dsn: str
) -> None:
    old = await settler.settle("acct-none", "failed")
    await archived_and_expired(settler, archive_dsn, old)
    async with api(settler, "") as http:
        status, body = await get(http, OPERATION.format(old))
    assert (status, body["error"]) == (404, "unknown_operation")


async def test_an_archive_that_does_not_answer_is_a_503_not_a_missing_operation(
    settler: Settler, archive_dsn: str
) -> None:
    old = await settler.settle("acct-down", "failed")
    await archived_and_expired(settler, archive_dsn, old)
    nowhere = f"postgresql://postgres@127.0.0.1:{free_port()}/resetgate"
    async with api(settler, nowhere) as http:
        status, body = await get(http, OPERATION.format(old))
        assert (status, body["error"]) == (503, "archive_unavailable"), body
        # The history still lists what Redis holds, and says the archive was not read.
        status, body = await get(http, HISTORY.format("acct-down"))
    assert (status, body["archive"]) == (200, "unavailable")


async def test_the_account_history_lists_archived_and_live_operations_since_a_time(
    settler: Settler, archive_dsn: str
) -> None:
    account = "acct-history"
    ops = [await settler.settle(account, outcome) for outcome in ("failed", "expired", "failed")]
    await archived_and_expired(settler, archive_dsn, *ops)
    newest = await settler.settle(account)  # still in Redis (not archived yet)
    async with api(settler, archive_dsn) as http:
        status, body = await get(http, HISTORY.format(account))
        assert status == 200, body
        assert body["archive"] == "archive"
        listed = [(v["operation_id"], v["source"]) for v in body["operations"]]
        ops.sort(key=lambda op: (operation_created_ms(op), op))  # newest last
        assert listed == [(newest, "redis")] + [(op, "archive") for op in reversed(ops)]
        since = operation_created_ms(ops[1])
        status, body = await get(http, HISTORY.format(account), since=since)
        listed = [v["operation_id"] for v in body["operations"]]
        assert ops[0] not in listed or operation_created_ms(ops[0]) == since
        assert listed[:3] == [newest, ops[2], ops[1]]
        status, body = await get(http, HISTORY.format(account), since="yesterday")
        assert (status, body["error"]) == (422, "invalid_parameter")


async def test_ops_show_reads_the_archive_and_says_so(settler: Settler, archive_dsn: str) -> None:
    old = await settler.settle("acct-cli", "failed")
    await archived_and_expired(settler, archive_dsn, old)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESETGATE_")}
    env.update(RESETGATE_REDIS_URL=settler.settings.redis_url, RESETGATE_PARTITIONS="4")

    def show(**extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "services.ctl.main", "ops", "show", old, "--json"],
            env={**env, **extra},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    done = show(RESETGATE_ARCHIVE_DSN=archive_dsn)
    assert done.returncode == 0, done.stderr
    view = codec.loads(done.stdout)
    assert (view["source"], view["state"]) == ("archive", "failed")
    done = show()
    assert done.returncode == 1
    assert "no archive" in done.stderr


async def test_the_console_operation_page_reads_the_archive_and_says_so(
    settler: Settler, archive_dsn: str
) -> None:
    old = await settler.settle("acct-console", "failed")
    await archived_and_expired(settler, archive_dsn, old)
    recent = await settler.settle("acct-console-2", "failed")
    settings = console_settings(settler.settings.redis_url, archive_dsn=archive_dsn, partitions=4)
    store = create_client(settings)
    try:
        async with maybe_pool(settings) as pool:
            server = TestServer(create_console_app(settings, store, pool), host="127.0.0.1")
            async with TestClient(server, cookie_jar=aiohttp.DummyCookieJar()) as http:
                headers = await sign_in(http)
                archived = await get_text(http, f"/console/operations/{old}", headers)
                live = await get_text(http, f"/console/operations/{recent}", headers)
    finally:
        await store.aclose()
    assert "Read from the archive" in archived and old in archived
    assert "recipient_refused" in archived  # the archived operation's reason
    assert "Read from Redis" in live and "Read from the archive" not in live

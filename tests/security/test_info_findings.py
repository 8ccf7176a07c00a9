"""Issue 10, item 8 (INFO): the actor's shape, and a lookup row for another key.

Each on real parts: a real admission process; a real HTTP server playing a provider whose
lookup answers a row for someone else's idempotency key.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from redis.asyncio import Redis

from services.poller.ambiguity import lookup
from shared.ids import operation_id
from shared.keys import PartitionKeys
from shared.providers.http import HttpProvider
from tests.security.conftest import BEARER, add_accounts
from tests.support.processes import Processes


async def test_the_actor_is_a_name_never_an_address_or_a_url(
    stack: Processes, redis: Redis
) -> None:
    """``last_actor`` used to keep whatever the caller sent, an address or a link included."""
    admission = await stack.start("admission")
    [(_, account_id)] = await add_accounts(redis, 1, prefix="actor")
    url = admission.url + "/internal/v1/recovery-operations"
    async with aiohttp.ClientSession() as session:
        for actor in ("agent:maria@example.com", "https://evil.example/x", "a b", "é"):
            body = {"account_id": account_id, "entry_point": "agent", "actor": actor}
            async with session.post(url, json=body, headers=BEARER) as reply:
                assert reply.status == 422, actor
                assert "actor" in (await reply.json())["message"]
        body = {"account_id": account_id, "entry_point": "agent", "actor": "agent:maria"}
        async with session.post(url, json=body, headers=BEARER) as reply:
            assert reply.status == 201
            created = await reply.json()
    key = PartitionKeys.of(created["operation_id"]).operation(created["operation_id"])
    assert await redis.hget(key, "last_actor") == "agent:maria"


@pytest.fixture
async def loose_provider() -> AsyncIterator[str]:
    """Answers every lookup with one row, for a key that is not the one asked about."""

    async def messages(request: web.Request) -> web.Response:
        asked = request.query["idempotency_key"]
        row = {
            "id": "msg-other",
            "idempotency_key": asked + "-other",
            "status": "accepted",
            "created_at": "2026-01-01T00:00:00Z",
        }
        return web.json_response({"data": [row]})

    app = web.Application()
    app.router.add_get("/email/messages", messages)
    async with TestServer(app, host="127.0.0.1") as server:
        yield str(server.make_url("")).rstrip("/")


async def test_a_lookup_row_for_another_key_is_not_our_send(loose_provider: str) -> None:
    """Reconciliation took the first row's message id whatever its key: an ambiguous
    operation became 'accepted' on the strength of someone else's email."""
    ours = operation_id(1)
    async with aiohttp.ClientSession() as session:
        provider = HttpProvider(session, loose_provider, "key")
        assert await lookup(provider, ours) == ""

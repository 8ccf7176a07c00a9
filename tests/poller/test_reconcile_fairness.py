"""Reconciliation is fair across partitions: one ambiguous operation whose lookup always
fails is backed off, and an ambiguous operation of a later partition is still looked up and
replayed. Real Redis, the real sandbox, with a small proxy in front of it that fails every
lookup of the first operation (the poller talks to the proxy, the sender to the sandbox)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
from aiohttp import web

from shared.keys import PartitionKeys, partition_of
from shared.model import State
from tests.poller.conftest import running_poller
from tests.sender.conftest import Stack
from tests.support.sandbox import sandbox_stats

PARTITIONS = 4


@asynccontextmanager
async def failing_lookups(upstream: str, operation_id: str) -> AsyncIterator[tuple[str, list]]:
    """A proxy to ``upstream`` that answers 500 to every lookup of ``operation_id``; yields
    (its URL, the times it refused one)."""
    refused: list[float] = []
    session = aiohttp.ClientSession()

    async def forward(request: web.Request) -> web.Response:
        if request.query.get("idempotency_key") == operation_id:
            refused.append(time.monotonic())
            return web.json_response({"error": "internal"}, status=500)
        headers = {k: v for k, v in request.headers.items() if k.lower() != "host"}
        body = await request.read()
        url = upstream + request.path_qs
        async with session.request(request.method, url, headers=headers, data=body) as answer:
            return web.Response(
                body=await answer.read(), status=answer.status, content_type=answer.content_type
            )

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", forward)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}", refused
    finally:
        await runner.cleanup()
        await session.close()


def account_in(partition: int, stem: str) -> str:
    return next(
        f"{stem}-{i}" for i in range(1000) if partition_of(f"{stem}-{i}", PARTITIONS) == partition
    )


async def ambiguous(stack: Stack, account_id: str) -> str:
    """An operation the provider never got, marked ambiguous (lost before the provider)."""
    op = await stack.admit(account_id)
    pk = PartitionKeys.of(op)
    await stack.redis.hset(pk.operation(op), mapping={"state": "ambiguous", "ambiguous_at": 1})
    await stack.redis.zadd(pk.ambiguous, {op: 1})
    return op


async def test_one_failing_lookup_holds_back_no_later_partition(stack: Stack) -> None:
    stuck = await ambiguous(stack, account_in(0, "acct-stuck"))
    later = await ambiguous(stack, account_in(PARTITIONS - 1, "acct-later"))
    async with failing_lookups(stack.provider_url, stuck) as (url, refused):
        started = time.monotonic()
        poller = running_poller(Stack(stack.redis, stack.redis_url, url))
        async with poller, stack.sender():
            done = await stack.wait_state(later, {State.ACCEPTED}, timeout=10)
            settle_until = time.monotonic() + 2.0
            while time.monotonic() < settle_until:
                await stack.wait_state(stuck, {State.AMBIGUOUS}, timeout=1)
                await asyncio.sleep(0.2)
        elapsed = time.monotonic() - started
    assert done.replays == 1
    stats = await sandbox_stats(stack.provider_url, operation_id=later)
    assert stats["sent_by_operation"][later] == 1
    assert (await stack.wait_state(stuck, {State.AMBIGUOUS})).replays == 0
    print(f"\nthe failing lookup asked {len(refused)} times in {elapsed:.1f} s")
    # Asked about every 0.05 s without a backoff; doubling from 0.05 s, a dozen at most.
    assert 1 <= len(refused) <= 12, (len(refused), elapsed)

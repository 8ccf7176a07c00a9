"""Automatic pipelining for the hot path: the commands of concurrent requests share round trips.

redis-py's asyncio client spends far more CPU per command (pool checkout, timeouts, packing
in Python) than the command costs Redis; with tens of requests in flight, admission was
bound by that overhead. :class:`BatchingRedis` is a drop-in ``Redis``: every command issued
during one event-loop iteration goes out as one non-transactional pipeline on one pooled
connection, and each caller gets its own reply or its own error (a NOSCRIPT for one script
call is that caller's ``NoScriptError``, so ``shared.scripts.Script`` reloads as usual).

Order is kept per caller (a caller awaits each reply before its next command); commands of
different callers never depended on each other's order. Blocking commands (WAIT, XREAD
BLOCK) must not go through it: :meth:`client` and :meth:`pipeline` hand out ordinary,
unbatched clients for those. Standalone only; a Cluster client is used as it is.
"""

from __future__ import annotations

import asyncio
from typing import Any

from redis.asyncio import Redis

from shared.redis import RedisClient

Pending = tuple[tuple[Any, ...], dict[str, Any], asyncio.Future[Any]]


class BatchingRedis(Redis):
    def __init__(self, inner: Redis) -> None:
        # Shares (does not own) the inner client's pool: closing the inner client closes it.
        super().__init__(connection_pool=inner.connection_pool)
        self._pending: list[Pending] = []
        self._scheduled = False

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._pending.append((args, options, future))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)
        return await future

    def client(self) -> Redis:
        """One dedicated connection, unbatched (for WAIT and other blocking commands)."""
        return Redis(connection_pool=self.connection_pool, single_connection_client=True)

    def _flush(self) -> None:
        self._scheduled = False
        batch, self._pending = self._pending, []
        pipe = self.pipeline(transaction=False)
        for args, options, _ in batch:
            pipe.execute_command(*args, **options)
        task = asyncio.ensure_future(pipe.execute(raise_on_error=False))
        task.add_done_callback(lambda done: _deliver(batch, done))


def _deliver(batch: list[Pending], done: asyncio.Future[list[Any]]) -> None:
    if done.cancelled():
        failure: BaseException | None = asyncio.CancelledError()
    else:
        failure = done.exception()
    if failure is not None:  # the round trip itself failed: every caller sees why
        for *_, future in batch:
            if not future.done():
                future.set_exception(failure)
        return
    for (*_, future), reply in zip(batch, done.result(), strict=True):
        if future.done():  # the caller went away (request cancelled)
            continue
        if isinstance(reply, Exception):
            future.set_exception(reply)
        else:
            future.set_result(reply)


def hot_path_client(client: RedisClient) -> RedisClient:
    """What admission's handlers use: batched on standalone Redis, the client as is on Cluster."""
    return BatchingRedis(client) if isinstance(client, Redis) else client

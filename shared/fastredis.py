"""FastRedis: redis-py's asyncio ``Redis`` with its single commands on one pipelined hiredis link.

redis-py spends far more CPU per command (pool checkout, a timeout context per read, retry
wrappers, packing in Python) than the command costs Redis; a service issuing a few commands
per HTTP request was bound by that. Here every plain command issued during one event-loop
iteration is packed by hiredis and written in one ``transport.write`` on one persistent
connection, and replies are handed out first-in first-out as hiredis parses them.

It stays a drop-in ``Redis``: the same command methods, the same RESP version and response
callbacks as the client it wraps (so replies are identical), redis-py's exceptions (a
NOSCRIPT is ``NoScriptError``, so ``shared.scripts.Script`` reloads as usual). Everything
that needs a connection of its own - pipelines, transactions, pub/sub, MONITOR, WAIT and
other blocking or connection-state commands - goes through the wrapped client's pool.

Failure behaviour:

- Every call is bounded by ``timeout``: when the oldest unanswered write is that old, the
  connection is aborted and every caller waiting on it gets ``redis.exceptions.TimeoutError``
  (replies are matched by order, so a connection that lost one reply is unusable).
- A broken connection fails the calls in flight with ``ConnectionError`` (their effect on
  Redis is unknown, exactly as with redis-py); the next call reconnects at once. A failed
  connect backs off exponentially with jitter (cap 2 s); during the backoff calls fail fast
  instead of queueing behind a dead server. Nothing is retried behind the caller's back.

Standalone Redis over TCP or a Unix socket only; Cluster and TLS keep plain redis-py
(:func:`fast_client` returns those clients unchanged).

Why it is worth leaning on redis-py internals (docs/performance.md, "Admission's pipelined
Redis link"): the real admission process with ``RESETGATE_FAST_REDIS=false`` against the
default, measured in turn five rounds each, twice, on a shared 2-core machine, needed 4.0x
the CPU per request (907-908 us against 224-226 us) and served 27-33 % of the requests/s::

    .venv/bin/python benchmarks/admission.py --variant FAST_REDIS=false --duration 10 --rounds 5
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, cast

import hiredis
from redis import utils as redis_utils
from redis._parsers import BaseParser, Encoder  # redis-py's error mapping and encoder
from redis.asyncio import Redis
from redis.asyncio.connection import Connection, UnixDomainSocketConnection
from redis.client import EMPTY_RESPONSE, NEVER_DECODE
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import DataError, RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.typing import KeyT

from shared import tracing
from shared.logging import event

log = logging.getLogger(__name__)

# Commands that change or hold the connection's state, or block it: on a connection shared
# by every caller they would leak into, or stall, everyone else's commands.
UNSHARED = frozenset(
    {
        *("MULTI", "EXEC", "DISCARD", "WATCH", "UNWATCH", "SELECT", "AUTH", "HELLO", "RESET"),
        *("QUIT", "CLIENT", "MONITOR", "SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "UNSUBSCRIBE"),
        *("PUNSUBSCRIBE", "SUNSUBSCRIBE", "WAIT", "WAITAOF", "BLPOP", "BRPOP", "BLMOVE"),
        *("BRPOPLPUSH", "BLMPOP", "BZPOPMIN", "BZPOPMAX", "BZMPOP", "XREAD", "XREADGROUP"),
        "SHUTDOWN",
    }
)
BACKOFF_BASE_S = 0.05
BACKOFF_CAP_S = 2.0
_INCOMPLETE = object()  # hiredis' "no complete reply yet" (False is a RESP3 reply)

Opener = Callable[[Callable[[], asyncio.Protocol]], Awaitable[tuple[Any, Any]]]


def _reply_error(message: str) -> RedisError:
    return BaseParser.parse_error(message)  # type: ignore[no-untyped-call,no-any-return]


def pack(args: tuple[Any, ...], encoder: Encoder) -> bytes:
    """RESP for one command; a multi-word name ("SCRIPT LOAD") is split like redis-py does."""
    name = args[0]
    if isinstance(name, str) and " " in name:
        args = (*name.split(), *args[1:])
    try:
        return hiredis.pack_command(args)  # type: ignore[no-any-return]
    except TypeError:  # an enum, a bool, None...: redis-py's rules (and its DataError)
        encoded = tuple(encoder.encode(arg) for arg in args)  # type: ignore[no-untyped-call]
        return hiredis.pack_command(encoded)  # type: ignore[no-any-return]


class _Protocol(asyncio.Protocol):
    """One connection: writes batched per loop iteration, replies matched in order."""

    def __init__(self, link: _Link) -> None:
        self.link = link
        self.loop = asyncio.get_running_loop()
        self.reader = hiredis.Reader(
            encoding="utf-8", replyError=_reply_error, notEnoughData=_INCOMPLETE
        )
        self.transport: asyncio.Transport | None = None
        self.waiting: deque[asyncio.Future[Any]] = deque()
        self.outgoing: list[bytes] = []
        self.flush_scheduled = False
        self.written = 0  # commands written so far
        self.marks: deque[tuple[int, float]] = deque()  # (written so far, first write's time)
        self.timer: asyncio.TimerHandle | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's does not subclass it

    def send(self, packed: bytes) -> asyncio.Future[Any]:
        future = self.loop.create_future()
        if self.closed:
            # Lost between a caller getting this connection and using it (Redis closed it
            # right after the connect, or mid-handshake): nothing would ever answer.
            future.set_exception(RedisConnectionError("Connection closed by server."))
            return future
        self.outgoing.append(packed)
        self.waiting.append(future)
        if not self.flush_scheduled:
            self.flush_scheduled = True
            self.loop.call_soon(self._flush)
        return future

    def _flush(self) -> None:
        self.flush_scheduled = False
        self._write()

    def _write(self) -> None:
        if self.closed or self.transport is None or not self.outgoing:
            return  # closed: the futures were failed when the connection closed
        batch, self.outgoing = self.outgoing, []
        self.transport.write(b"".join(batch))
        self.written += len(batch)
        now = self.loop.time()
        marks = self.marks
        if marks and now - marks[-1][1] < self.link.timeout / 8:
            # One mark per eighth of the timeout, dated by its first write: a few marks,
            # not one per flush, at the price of a deadline up to an eighth early.
            marks[-1] = (self.written, marks[-1][1])
        else:
            marks.append((self.written, now))
        if self.timer is None:
            self.timer = self.loop.call_at(now + self.link.timeout, self._check_deadline)

    def _check_deadline(self) -> None:
        """The oldest unanswered write past the timeout means the link is stuck: abort it."""
        self.timer = None
        marks = self.marks
        answered = self.written + len(self.outgoing) - len(self.waiting)
        while marks and marks[0][0] <= answered:
            marks.popleft()
        if not marks:
            return
        deadline = marks[0][1] + self.link.timeout
        if self.loop.time() >= deadline:
            self.abort(RedisTimeoutError(f"Redis did not answer within {self.link.timeout} s"))
        else:
            self.timer = self.loop.call_at(deadline, self._check_deadline)

    def data_received(self, data: bytes) -> None:
        reader = self.reader
        reader.feed(data)
        waiting = self.waiting
        while True:
            try:
                reply = reader.gets()
            except hiredis.ProtocolError as error:
                self.abort(RedisConnectionError(f"Redis protocol error: {error}"))
                return
            if reply is _INCOMPLETE:
                return
            if isinstance(reply, hiredis.PushNotification):
                continue  # nothing here subscribes; never a reply to a caller
            future = waiting.popleft()
            if future.done():  # the caller went away (its request was cancelled)
                continue
            if isinstance(reply, RedisError):  # an error reply, already redis-py's exception
                future.set_exception(reply)
            else:
                future.set_result(reply)

    def abort(self, error: RedisError) -> None:
        if self.transport is not None:
            self.transport.abort()
        self._fail(error)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(RedisConnectionError("Connection closed by server."))

    def _fail(self, error: RedisError) -> None:
        if self.closed:
            return
        self.closed = True
        if self.timer is not None:
            self.timer.cancel()
        self.link.lost(self, error)
        while self.waiting:
            future = self.waiting.popleft()
            if not future.done():
                future.set_exception(error)


class _Link:
    """Keeps one :class:`_Protocol` connected: reconnects on demand, backs off on failure."""

    def __init__(
        self, opener: Opener, handshake: list[tuple[Any, ...]], timeout: float, encoder: Encoder
    ) -> None:
        self.opener = opener
        self.encoder = encoder
        self.handshake = handshake
        self.timeout = timeout
        self.protocol: _Protocol | None = None
        self.connecting: asyncio.Task[_Protocol] | None = None
        self.failures = 0
        self.retry_at = 0.0

    def call(self, args: tuple[Any, ...]) -> Awaitable[Any]:
        protocol = self.protocol
        if protocol is None or protocol.closed:
            return self._call_reconnecting(args)
        try:
            packed = pack(args, self.encoder)
        except DataError as error:  # raised on await, as redis-py does
            failed = asyncio.get_running_loop().create_future()
            failed.set_exception(error)
            return failed
        return protocol.send(packed)

    async def _call_reconnecting(self, args: tuple[Any, ...]) -> Any:
        packed = pack(args, self.encoder)  # a DataError before any connection work
        protocol = await self._connected()
        return await protocol.send(packed)

    async def _connected(self) -> _Protocol:
        loop = asyncio.get_running_loop()
        if self.connecting is None:
            wait = self.retry_at - loop.time()
            if wait > 0:
                raise RedisConnectionError(f"Redis unreachable; reconnecting in {wait:.2f} s")
            self.connecting = loop.create_task(self._connect())
            self.connecting.add_done_callback(self._connect_done)
        # Shielded: one caller giving up must not cancel the connect others wait for.
        return await asyncio.shield(self.connecting)

    def _connect_done(self, task: asyncio.Task[_Protocol]) -> None:
        self.connecting = None
        if not task.cancelled() and task.exception() is None and not task.result().closed:
            self.protocol = task.result()

    async def _connect(self) -> _Protocol:
        try:
            async with asyncio.timeout(self.timeout):
                _, protocol = await self.opener(lambda: _Protocol(self))
        except (OSError, TimeoutError) as error:
            self._failed(error)
            kind = RedisTimeoutError if isinstance(error, TimeoutError) else RedisConnectionError
            raise kind(f"Error connecting to Redis: {type(error).__name__}") from None
        assert isinstance(protocol, _Protocol)
        try:  # HELLO/AUTH/SELECT; bounded by the protocol's own deadline (and send's check)
            for command in self.handshake:
                await protocol.send(pack(command, self.encoder))
        except RedisError as error:
            protocol.abort(RedisConnectionError("handshake failed"))
            self._failed(error)
            raise
        self.failures = 0
        return protocol

    def _failed(self, error: BaseException) -> None:
        self.failures += 1
        delay = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** (self.failures - 1))
        delay *= 0.5 + random.random() / 2  # jitter: replicas do not reconnect in lockstep
        self.retry_at = asyncio.get_running_loop().time() + delay
        event(
            log,
            logging.WARNING,
            "redis connect failed",
            error=type(error).__name__,
            attempt=self.failures,
            retry_in_s=round(delay, 3),
        )

    def lost(self, protocol: _Protocol, error: RedisError) -> None:
        if self.protocol is protocol:
            self.protocol = None
            event(log, logging.WARNING, "redis connection lost", error=type(error).__name__)

    def close(self) -> None:
        protocol, self.protocol = self.protocol, None  # a deliberate close is not "lost"
        if protocol is not None:
            protocol.abort(RedisConnectionError("client closed"))
        if self.connecting is not None:
            self.connecting.cancel()


class FastRedis(Redis):
    """A ``Redis`` whose plain commands share one auto-pipelined hiredis connection."""

    def __init__(self, inner: Redis, timeout: float | None = None) -> None:
        # Shares (does not own) the inner client's pool: closing the inner client closes it.
        super().__init__(connection_pool=inner.connection_pool)
        kwargs = inner.connection_pool.connection_kwargs
        timeout = timeout or kwargs.get("socket_timeout") or 5.0
        encoder = inner.connection_pool.get_encoder()  # type: ignore[no-untyped-call]
        self._link = _Link(_opener(inner), _handshake(kwargs), float(timeout), encoder)
        self._resp3 = _protocol(kwargs) == 3

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        name = args[0]
        if name in UNSHARED or NEVER_DECODE in options or name.split(" ", 1)[0] in UNSHARED:
            return await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        try:
            reply = await self._link.call(args)
        except ResponseError:
            if EMPTY_RESPONSE in options:
                return options[EMPTY_RESPONSE]
            raise
        callback = self.response_callbacks.get(name)
        if callback is None:
            return reply
        options.pop(EMPTY_RESPONSE, None)
        options.pop("keys", None)
        return callback(reply, **options)

    # The hot path's commands, without a coroutine per call: on RESP3 (redis-py's default)
    # their replies need no callback, so the caller awaits the reply future itself.
    def get(self, name: KeyT) -> Awaitable[Any]:
        return self._link.call(("GET", name))

    def hgetall(self, name: KeyT) -> Awaitable[Any]:
        if not self._resp3:
            return super().hgetall(name)  # RESP2 needs redis-py's pairs -> dict callback
        return self._link.call(("HGETALL", name))

    def hmget(self, name: KeyT, keys: Any, *args: Any) -> Awaitable[Any]:
        fields = (keys,) if isinstance(keys, str | bytes) else tuple(keys)
        return self._link.call(("HMGET", name, *fields, *args))

    def evalsha(self, sha: str, numkeys: int, *keys_and_args: Any) -> Awaitable[Any]:
        return self._link.call(("EVALSHA", sha, numkeys, *keys_and_args))

    def client(self) -> Redis:
        """One dedicated pooled connection (for WAIT and other blocking commands)."""
        return Redis(connection_pool=self.connection_pool, single_connection_client=True)

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        self._link.close()
        await super().aclose(close_connection_pool)


def _opener(inner: Redis) -> Opener:
    pool = inner.connection_pool
    kwargs = pool.connection_kwargs
    loop = asyncio.get_running_loop
    if pool.connection_class is UnixDomainSocketConnection:
        path = kwargs["path"]
        return lambda factory: loop().create_unix_connection(factory, path)
    host, port = kwargs.get("host", "localhost"), int(kwargs.get("port", 6379))
    return lambda factory: loop().create_connection(factory, host, port)


def _handshake(kwargs: dict[str, Any]) -> list[tuple[Any, ...]]:
    """What redis-py sends on connect: the same RESP version (so the same callbacks fit)."""
    commands: list[tuple[Any, ...]] = []
    password, username = kwargs.get("password"), kwargs.get("username")
    if _protocol(kwargs) == 3:
        auth = ("AUTH", username or "default", password) if password else ()
        commands.append(("HELLO", 3, *auth))
    elif password:
        commands.append(("AUTH", username, password) if username else ("AUTH", password))
    if int(kwargs.get("db") or 0):
        commands.append(("SELECT", int(kwargs["db"])))
    return commands


def _protocol(kwargs: dict[str, Any]) -> int:
    try:
        return int(kwargs.get("protocol"))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return int(getattr(redis_utils, "DEFAULT_RESP_VERSION", 2))


def fast_client(client: Any, enabled: bool = True) -> Any:
    """``client`` wrapped in :class:`FastRedis` when it can be (standalone over TCP or Unix
    socket), else ``client`` itself (Cluster, TLS, or ``enabled`` False: the
    ``RESETGATE_FAST_REDIS=false`` fallback for a redis-py whose internals moved)."""
    if not enabled or not isinstance(client, Redis) or isinstance(client, FastRedis):
        return client
    if client.connection_pool.connection_class not in (Connection, UnixDomainSocketConnection):
        return client
    fast = FastRedis(client)
    tracing.redis_commands(fast, like=client)  # command spans, if the inner client has them
    return fast

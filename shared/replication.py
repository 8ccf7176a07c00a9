"""Redis ``WAIT``: a write counts once ``count`` replicas hold it.

Replication is asynchronous: a failover can promote a replica that has not seen the last
writes, and what the primary acknowledged is gone. ``WAIT`` counts the replicas that
acknowledged the *calling connection's* last write, so it must run on the connection that
made the write: through a pool, a WAIT on another connection could return at once without
covering it. :meth:`Replicas.connection` therefore lends one connection (on Cluster: to the
node holding the key) for the write and its WAIT. Admission waits before it acknowledges an
operation; the sender before it hands an attempt to the provider.

Under Sentinel the lent connection comes from Sentinel's pool, so it is the current
primary's. On Cluster the node is the one the cluster client's slot map names; a node that
is gone or answers MOVED makes the client re-read the map, so the next try reaches the
promoted replica.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit, urlunsplit

from redis.asyncio import Redis, RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import MovedError
from redis.exceptions import TimeoutError as RedisTimeoutError

from shared.redis import RedisClient
from shared.settings import RedisSettings

# A node connection failing this way means the slot map may be stale (a failover).
_MAP_STALE = (RedisConnectionError, RedisTimeoutError, MovedError, OSError)


class NotReplicated(RuntimeError):
    """Fewer replicas than required acknowledged the write in time; the caller retries."""


class Replicas:
    """``count`` replicas (``RESETGATE_WAIT_REPLICAS``; 0 = no WAIT) within ``timeout_ms``."""

    def __init__(
        self, client: RedisClient, settings: RedisSettings, count: int = 0, timeout_ms: int = 200
    ) -> None:
        self.client = client
        self.settings = settings
        self.count = count
        self.timeout_ms = timeout_ms
        self._node_clients: dict[str, Redis] = {}

    @asynccontextmanager
    async def connection(self, key: str) -> AsyncIterator[RedisClient]:
        """The shared client when no WAIT is asked for, else one lent connection to the
        primary holding ``key``."""
        if not self.count:
            yield self.client
            return
        cluster = self.client if isinstance(self.client, RedisCluster) else None
        base = self.client if cluster is None else self._node_client(cluster, key)
        assert isinstance(base, Redis)
        connection = base.client()
        try:
            yield connection
        except _MAP_STALE:
            if cluster is not None:
                await cluster.nodes_manager.initialize()
            raise
        finally:
            await connection.aclose(close_connection_pool=False)

    async def wait(self, connection: RedisClient) -> None:
        """Raise :class:`NotReplicated` unless ``count`` replicas hold this connection's
        writes within the timeout."""
        if not self.count:
            return
        acknowledged = int(await connection.wait(self.count, self.timeout_ms))
        if acknowledged < self.count:
            raise NotReplicated(f"{acknowledged} of {self.count} replicas acknowledged")

    def _node_client(self, cluster: RedisCluster, key: str) -> Redis:
        node = cluster.get_node_from_key(key)
        if node is None:
            raise NotReplicated("no cluster node holds the partition right now")
        client = self._node_clients.get(node.name)
        if client is None:
            client = Redis.from_url(
                _node_url(self.settings.redis_url, node.host, node.port),
                decode_responses=True,
                socket_timeout=self.settings.redis_timeout_seconds,
                socket_connect_timeout=self.settings.redis_timeout_seconds,
            )
            self._node_clients[node.name] = client
        return client

    async def close(self) -> None:
        for client in self._node_clients.values():
            await client.aclose()
        self._node_clients.clear()


def _node_url(url: str, host: str, port: int | str) -> str:
    """The cluster URL pointed at one node, keeping scheme, credentials and database."""
    parts = urlsplit(url)
    userinfo, _, _ = parts.netloc.rpartition("@")
    netloc = f"{userinfo}@{host}:{port}" if userinfo else f"{host}:{port}"
    return urlunsplit(parts._replace(netloc=netloc))

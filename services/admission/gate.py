"""Admissions as the HTTP gate runs them: the shared Admitter, plus WAIT for replicas.

``WAIT`` counts the replicas that acknowledged the *calling connection's* last write, so it
must run on the connection that ran the admit script: through a pool, a WAIT on another
connection could return at once without covering our write. With ``wait_replicas`` set, each
admission therefore borrows one connection (on Cluster: to the node holding the partition)
for the script and the WAIT. Unknown logins take the same path, WAIT included.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit, urlunsplit

from redis.asyncio import Redis, RedisCluster

from shared.admit import Admission, Admitter, unknown_account_id
from shared.keys import PartitionKeys, partition_of
from shared.redis import RedisClient
from shared.settings import PolicySettings
from shared.tokens import TokenKeys


class NotReplicated(RuntimeError):
    """Fewer replicas than required acknowledged the admission in time; the caller retries."""


class Gate:
    def __init__(
        self,
        client: RedisClient,
        settings: PolicySettings,
        keys: TokenKeys,
        wait_replicas: int = 0,
        wait_timeout_ms: int = 200,
    ) -> None:
        self.client = client
        self.settings = settings
        self.keys = keys
        self.wait_replicas = wait_replicas
        self.wait_timeout_ms = wait_timeout_ms
        self._node_clients: dict[str, Redis] = {}
        self._admitter = Admitter(client, settings, keys)

    async def admit(self, account_id: str, entry_point: str, actor: str = "") -> Admission:
        return await self._admit(account_id, entry_point, actor, dry=False)

    async def admit_unknown(self, login: str) -> Admission:
        """The same commands, script and WAIT as a known login; writes nothing."""
        return await self._admit(unknown_account_id(login), "public", "", dry=True)

    async def _admit(self, account_id: str, entry_point: str, actor: str, dry: bool) -> Admission:
        account_key = self._account_key(account_id)
        if not self.wait_replicas:  # the shared client; no connection to borrow for a WAIT
            expected = await _last_operation(self.client, account_key)
            return await self._admitter.admit(
                account_id, entry_point, actor, dry=dry, expected=expected
            )
        async with self._connection(account_id) as connection:
            admitter = Admitter(connection, self.settings, self.keys)
            expected = await _last_operation(connection, account_key)
            admission = await admitter.admit(
                account_id, entry_point, actor, dry=dry, expected=expected
            )
            await self._wait(connection)
        return admission

    def _account_key(self, account_id: str) -> str:
        return PartitionKeys(partition_of(account_id, self.settings.partitions)).account(account_id)

    async def _wait(self, connection: RedisClient) -> None:
        if not self.wait_replicas:
            return
        acknowledged = int(await connection.wait(self.wait_replicas, self.wait_timeout_ms))
        if acknowledged < self.wait_replicas:
            raise NotReplicated(f"{acknowledged} of {self.wait_replicas} replicas acknowledged")

    @asynccontextmanager
    async def _connection(self, account_id: str) -> AsyncIterator[RedisClient]:
        """The shared client, or with WAIT on, one borrowed connection to the key's node."""
        if not self.wait_replicas:
            yield self.client
            return
        base = self.client
        if isinstance(base, RedisCluster):
            base = self._node_client(base, self._account_key(account_id))
        connection = base.client()
        try:
            yield connection
        finally:
            await connection.aclose(close_connection_pool=False)

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
            )
            self._node_clients[node.name] = client
        return client

    async def close(self) -> None:
        for client in self._node_clients.values():
            await client.aclose()
        self._node_clients.clear()


async def _last_operation(client: RedisClient, account_key: str) -> str:
    """Read first, so every admission - unknown, new, converged, cooldown - costs the same
    commands: without it a converging one pays an extra "retry" round trip (a timing tell)."""
    (last,) = await client.hmget(account_key, ["last"])
    return str(last or "")


def _node_url(url: str, host: str, port: int | str) -> str:
    """The cluster URL pointed at one node, keeping scheme, credentials and database."""
    parts = urlsplit(url)
    userinfo, _, _ = parts.netloc.rpartition("@")
    netloc = f"{userinfo}@{host}:{port}" if userinfo else f"{host}:{port}"
    return urlunsplit(parts._replace(netloc=netloc))

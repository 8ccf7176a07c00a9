"""Admissions as the HTTP gate runs them: the shared Admitter, plus WAIT for replicas.

With ``wait_replicas`` set, each admission borrows one connection (on Cluster: to the node
holding the partition) for the script and the WAIT (shared.replication says why). Unknown
logins take the same path, WAIT included.
"""

from __future__ import annotations

from shared.admit import Admission, Admitter, unknown_account_id
from shared.keys import PartitionKeys, partition_of
from shared.redis import RedisClient
from shared.replication import NotReplicated, Replicas
from shared.settings import PolicySettings
from shared.tokens import TokenKeys

__all__ = ["Gate", "NotReplicated"]


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
        self.replicas = Replicas(client, settings, wait_replicas, wait_timeout_ms)
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
        async with self.replicas.connection(account_key) as connection:
            admitter = Admitter(connection, self.settings, self.keys)
            expected = await _last_operation(connection, account_key)
            admission = await admitter.admit(
                account_id, entry_point, actor, dry=dry, expected=expected
            )
            await self.replicas.wait(connection)
        return admission

    def _account_key(self, account_id: str) -> str:
        return PartitionKeys(partition_of(account_id, self.settings.partitions)).account(account_id)

    async def close(self) -> None:
        await self.replicas.close()


async def _last_operation(client: RedisClient, account_key: str) -> str:
    """Read first, so every admission - unknown, new, converged, cooldown - costs the same
    commands: without it a converging one pays an extra "retry" round trip (a timing tell)."""
    (last,) = await client.hmget(account_key, ["last"])
    return str(last or "")

"""A Sentinel deployment of real processes: a primary, a replica and three Sentinels
(``redis-server --sentinel``), the shape of a self-managed or Bitnami Redis with Sentinel.

Failover is quick (down after 1 s, quorum 2) so a test that SIGKILLs the primary sees the
replica promoted within a few seconds.
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path

import redis

from services.ctl.embedded import RedisServer, redis_server_binary

MASTER = "rgmaster"
DOWN_AFTER_MS = 1000


class DataServer(RedisServer):
    """A primary, or with ``primary`` a replica of it from the start. A full sync starts at
    once (Redis waits 5 s by default for more replicas to share it)."""

    def __init__(self, primary: RedisServer | None = None, **options: object) -> None:
        super().__init__(**options)  # type: ignore[arg-type]
        self.primary = primary

    def args(self) -> list[str]:
        args = [*super().args(), "--repl-diskless-sync-delay", "0"]
        if self.primary is None:
            return args
        return [*args, "--replicaof", "127.0.0.1", str(self.primary.port)]


class SentinelServer(RedisServer):
    """One Sentinel watching ``primary`` under :data:`MASTER`; it rewrites its own config.

    It is told the replica and the other Sentinels up front (``known-*``, as a restarted
    Sentinel's rewritten config would say): discovering them takes Sentinel 10 s or more."""

    def __init__(self, primary: RedisServer, replica: RedisServer) -> None:
        super().__init__()
        self.primary = primary
        self.replica = replica
        self.myid = secrets.token_hex(20)
        self.others: list[SentinelServer] = []

    def args(self) -> list[str]:
        config = Path(self.directory) / "sentinel.conf"
        if not config.exists():  # kept across a restart: Sentinel wrote its state into it
            config.write_text(
                f"port {self.port}\nbind 127.0.0.1\ndir {self.directory}\n"
                f"logfile {self.directory}/sentinel.log\n"
                f"sentinel monitor {MASTER} 127.0.0.1 {self.primary.port} 2\n"
                f"sentinel down-after-milliseconds {MASTER} {DOWN_AFTER_MS}\n"
                f"sentinel failover-timeout {MASTER} 10000\n"
                f"sentinel parallel-syncs {MASTER} 1\n"
                f"sentinel myid {self.myid}\n"
                f"sentinel known-replica {MASTER} 127.0.0.1 {self.replica.port}\n"
                + "".join(
                    f"sentinel known-sentinel {MASTER} 127.0.0.1 {o.port} {o.myid}\n"
                    for o in self.others
                )
            )
        return [redis_server_binary(), str(config), "--sentinel"]


class SentinelDeployment:
    """Primary + replica + three Sentinels; ``primary_port()`` asks the Sentinels."""

    def __init__(
        self,
        appendonly: bool = True,
        appendfsync: str = "always",
        server: type[DataServer] = DataServer,
    ) -> None:
        self.primary = server(appendonly=appendonly, appendfsync=appendfsync)
        self.replica = server(self.primary, appendonly=appendonly, appendfsync=appendfsync)
        self.sentinels = [SentinelServer(self.primary, self.replica) for _ in range(3)]
        for sentinel in self.sentinels:
            sentinel.others = [o for o in self.sentinels if o is not sentinel]

    @property
    def addresses(self) -> str:
        """RESETGATE_REDIS_SENTINELS."""
        return ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)

    def servers(self) -> list[RedisServer]:
        return [self.primary, self.replica]

    def start(self, timeout: float = 30.0) -> SentinelDeployment:
        self.primary.start()
        self.replica.start()
        self.wait_replicated(timeout)
        for sentinel in self.sentinels:
            sentinel.start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:  # every Sentinel knows the replica and the others
            if all(self._sees_everyone(s) for s in self.sentinels):
                return self
            time.sleep(0.1)
        raise RuntimeError("the sentinels did not discover each other and the replica")

    def _sees_everyone(self, sentinel: SentinelServer) -> bool:
        with redis.Redis(port=sentinel.port, socket_timeout=1, decode_responses=True) as client:
            state = client.sentinel_master(MASTER)
        return int(state["num-slaves"]) >= 1 and int(state["num-other-sentinels"]) >= 2

    def wait_replicated(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with redis.Redis(port=self.primary.port, socket_timeout=1, decode_responses=True) as c:
            while time.monotonic() < deadline:
                info = c.info("replication")
                if info.get("slave0", {}).get("state") == "online":
                    return
                time.sleep(0.05)
        raise RuntimeError("the replica did not connect to the primary")

    def primary_port(self) -> int | None:
        """The port the Sentinels currently name as primary (None if none answers)."""
        for sentinel in self.sentinels:
            try:
                with redis.Redis(port=sentinel.port, socket_timeout=1) as client:
                    _, port = client.sentinel_get_master_addr_by_name(MASTER)
                    return int(port)
            except (redis.exceptions.RedisError, TypeError, ValueError):
                continue
        return None

    def stop(self) -> None:
        for server in [*self.sentinels, self.replica, self.primary]:
            server.stop()

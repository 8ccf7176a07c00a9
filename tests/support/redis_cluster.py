"""A 3-master Redis Cluster of real redis-server processes, for tests and benchmarks.

Split from services/ctl/embedded.py (which `resetgate up` uses for its one standalone Redis):
only tests run a Cluster locally.
"""

from __future__ import annotations

import time
from typing import Any

import redis

from services.ctl.embedded import RedisServer
from tests.support import cluster_scripts


class RedisClusterServers:
    """Three masters, slots split evenly, no replicas: enough to catch any CROSSSLOT. With
    ``replicas`` (per master) a failover can be tested: ``replicas_of[i]`` replicate
    ``nodes[i]``."""

    def __init__(
        self,
        masters: int = 3,
        replicas: int = 0,
        server: type[RedisServer] = RedisServer,
        **options: object,
    ) -> None:
        self.nodes = [server(cluster=True, **options) for _ in range(masters)]  # type: ignore[arg-type]
        self.replicas_of = [
            [server(cluster=True, **options) for _ in range(replicas)]  # type: ignore[arg-type]
            for _ in range(masters)
        ]

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.nodes[0].port}/0"

    def start(self, timeout: float = 30.0) -> RedisClusterServers:
        for node in self.nodes:
            node.start()
        clients = [redis.Redis(port=n.port, socket_timeout=2) for n in self.nodes]
        share = 16384 // len(self.nodes)
        for index, client in enumerate(clients):
            last = 16383 if index == len(clients) - 1 else (index + 1) * share - 1
            _command(client, "CLUSTER ADDSLOTS", *range(index * share, last + 1))
        for client in clients[1:]:
            _command(client, "CLUSTER MEET", "127.0.0.1", self.nodes[0].port)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            infos = [_command(c, "CLUSTER INFO") for c in clients]
            if all(_cluster_ok(info) for info in infos):
                break
            time.sleep(0.1)
        else:
            raise RuntimeError("redis cluster did not reach cluster_state:ok")
        self._add_replicas(clients, deadline)
        return self

    def _add_replicas(self, masters: list[redis.Redis], deadline: float) -> None:
        pairs = [
            (master, replica)
            for master, replicas in zip(masters, self.replicas_of, strict=True)
            for replica in replicas
        ]
        for master in masters:  # a full sync at once, not after Redis' 5 s wait for company
            _command(master, "CONFIG SET", "repl-diskless-sync-delay", "0")
        for master, replica in pairs:
            replica.start()
            client = redis.Redis(port=replica.port, socket_timeout=2)
            _command(client, "CLUSTER MEET", "127.0.0.1", self.nodes[0].port)
            master_id = _command(master, "CLUSTER MYID")
            while True:  # REPLICATE needs the replica to know the master first
                try:
                    _command(client, "CLUSTER REPLICATE", master_id)
                    break
                except redis.exceptions.ResponseError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
        while pairs and time.monotonic() < deadline:
            synced = [_command(m, "INFO", "replication") for m in masters]
            if all(_online_replicas(info) >= len(self.replicas_of[0]) for info in synced):
                return
            time.sleep(0.1)
        if pairs:
            raise RuntimeError("cluster replicas did not sync")

    def all_nodes(self) -> list[RedisServer]:
        return [*self.nodes, *(r for replicas in self.replicas_of for r in replicas)]

    def stop(self) -> None:
        running = [n for n in self.all_nodes() if n.process and n.process.poll() is None]
        cluster_scripts.keep([n.port for n in running])  # the cache goes with the nodes
        for node in self.all_nodes():
            node.stop()


def _command(client: redis.Redis, *args: object) -> Any:
    return client.execute_command(*args)  # type: ignore[no-untyped-call]


def _online_replicas(info: Any) -> int:
    text = info.decode() if isinstance(info, bytes) else str(info)
    if isinstance(info, dict):
        return sum(
            1
            for k, v in info.items()
            if k.startswith("slave") and isinstance(v, dict) and v.get("state") == "online"
        )
    return text.count("state=online")


def _cluster_ok(info: bytes | str | dict[str, object]) -> bool:
    if isinstance(info, dict):
        return info.get("cluster_state") == "ok" and int(str(info.get("cluster_known_nodes"))) >= 3
    text = info.decode() if isinstance(info, bytes) else info
    return "cluster_state:ok" in text and "cluster_known_nodes:3" in text

"""A 3-master Redis Cluster of real redis-server processes, for tests and benchmarks.

Split from services/ctl/embedded.py (which `resetgate up` uses for its one standalone Redis):
only tests run a Cluster locally.
"""

from __future__ import annotations

import time
from typing import Any

import redis

from services.ctl.embedded import RedisServer


class RedisClusterServers:
    """Three masters, slots split evenly, no replicas: enough to catch any CROSSSLOT."""

    def __init__(self, masters: int = 3) -> None:
        self.nodes = [RedisServer(cluster=True) for _ in range(masters)]

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
                return self
            time.sleep(0.1)
        raise RuntimeError("redis cluster did not reach cluster_state:ok")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def _command(client: redis.Redis, *args: object) -> Any:
    return client.execute_command(*args)  # type: ignore[no-untyped-call]


def _cluster_ok(info: bytes | str | dict[str, object]) -> bool:
    if isinstance(info, dict):
        return info.get("cluster_state") == "ok" and int(str(info.get("cluster_known_nodes"))) >= 3
    text = info.decode() if isinstance(info, bytes) else info
    return "cluster_state:ok" in text and "cluster_known_nodes:3" in text

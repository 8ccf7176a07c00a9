"""Losing the Redis primary mid-storm: one run, start to verdict.

A replicated Redis (Sentinel: a primary, a replica, three Sentinels; or Cluster: three
masters with a replica each, every node ``appendonly yes`` + ``appendfsync always``), the
sandbox speaking a provider without an idempotency key (Postmark), and admission, two senders
and a poller as real processes. Operations are admitted through admission's internal API
(a 201 carries the acknowledged operation id; a failed call is retried like a client would,
which converges on the account's operation). Part way through, the primary (on Cluster: one
master) loses its replica for LAG_S (a partition: it goes on acknowledging writes the
replica never sees, which asynchronous replication allows) and is then SIGKILLed; the
Sentinels (the cluster) promote the replica that missed those writes; the killed node comes
back, as Kubernetes would restart its pod, and rejoins as a replica.

The verdict counts acknowledged operations the store no longer has, emails sent twice, and
how long after the kill admissions were acknowledged again; with ``RESETGATE_WAIT_REPLICAS``
1 or 0 (the sender then runs with ``RESETGATE_KEYLESS_REQUIRE_REPLICA_WAIT=false``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import redis
from redis.asyncio import RedisCluster

from services.ctl.embedded import RedisServer
from shared import codec
from shared.redis import RedisClient, create_client
from shared.settings import CommonSettings
from tests.chaos import audit
from tests.chaos.driver import Acks, Channel
from tests.chaos.stack import (
    INTERNAL_TOKEN,
    POLLER_ENV,
    SENDER_ENV,
    account_id,
    seed_directory,
    service_env,
)
from tests.support.processes import Processes, ServiceProcess
from tests.support.redis_cluster import RedisClusterServers
from tests.support.redis_sentinel import MASTER, DataServer, SentinelDeployment
from tests.support.sandbox import run_sandbox_process, sandbox_stats

PROVIDER = "postmark"  # no idempotency key: nothing on the provider's side absorbs a resend
CONCURRENCY = 32
SERVICES = ("admission", "sender-1", "sender-2", "poller")


REPL_USER, REPL_PASSWORD = "repl", "failover-repl-password"
LAG_S = 1.5  # how long the replica is cut off before the primary dies


class LinkedServer(DataServer):
    """A data node whose replication link can be cut: replicas authenticate as their own
    ACL user, which the primary can switch off (and disconnect) while everyone else goes
    on writing to it."""

    def args(self) -> list[str]:
        return [*super().args(), "--masteruser", REPL_USER, "--masterauth", REPL_PASSWORD]

    def start(self, timeout: float = 10.0) -> LinkedServer:
        super().start(timeout)
        with redis.Redis(port=self.port, socket_timeout=2) as client:
            client.acl_setuser(
                REPL_USER,
                enabled=True,
                passwords=[f"+{REPL_PASSWORD}"],
                keys=["*"],
                channels=["*"],
                commands=["+@all"],
            )
        return self


def cut_replication(primary: RedisServer) -> None:
    """The primary goes on acknowledging writes its replica never receives: what a network
    partition between them does just before the primary dies."""
    with redis.Redis(port=primary.port, socket_timeout=2) as client:
        client.acl_setuser(REPL_USER, enabled=False)
        client.execute_command("CLIENT", "KILL", "USER", REPL_USER)


class Topology(Protocol):
    """A replicated Redis whose primary can be killed and brought back."""

    env: dict[str, str]

    def client(self) -> RedisClient: ...
    def cut_replica(self) -> None: ...
    def kill_primary(self) -> None: ...
    def promoted(self) -> bool: ...
    def restart_killed(self) -> None: ...
    def stop(self) -> None: ...


class SentinelTopology:
    def __init__(self) -> None:
        self.deployment = SentinelDeployment(
            appendonly=True, appendfsync="always", server=LinkedServer
        ).start()
        self.env = {
            "RESETGATE_REDIS_SENTINELS": self.deployment.addresses,
            "RESETGATE_REDIS_SENTINEL_MASTER": MASTER,
            # Sentinel names the host; the URL gives the database (and password, TLS).
            "RESETGATE_REDIS_URL": "redis://sentinel-named/0",
        }

    def client(self) -> RedisClient:
        return create_client(
            CommonSettings(redis_sentinels=self.deployment.addresses, redis_sentinel_master=MASTER)
        )

    def cut_replica(self) -> None:
        cut_replication(self.deployment.primary)

    def kill_primary(self) -> None:
        self.deployment.primary.stop(kill=True)

    def promoted(self) -> bool:
        return self.deployment.primary_port() == self.deployment.replica.port

    def restart_killed(self) -> None:
        self.deployment.primary.start(30)  # the Sentinels turn it into the new replica

    def stop(self) -> None:
        self.deployment.stop()


class ClusterTopology:
    def __init__(self) -> None:
        self.servers = RedisClusterServers(
            replicas=1, server=LinkedServer, appendonly=True, appendfsync="always"
        ).start(60)
        self.victim = self.servers.nodes[1]
        self.heir = self.servers.replicas_of[1][0]
        self.env = {"RESETGATE_REDIS_URL": self.servers.url, "RESETGATE_REDIS_CLUSTER": "true"}

    def client(self) -> RedisClient:
        return RedisCluster.from_url(self.servers.url, decode_responses=True)

    def cut_replica(self) -> None:
        cut_replication(self.victim)

    def kill_primary(self) -> None:
        self.victim.stop(kill=True)

    def promoted(self) -> bool:
        return _role(self.heir) == "master"

    def restart_killed(self) -> None:
        self.victim.start(30)  # its nodes.conf says it was failed over: it rejoins as replica

    def stop(self) -> None:
        self.servers.stop()


def _role(server: RedisServer) -> str:
    try:
        with redis.Redis(port=server.port, socket_timeout=1, decode_responses=True) as client:
            return str(client.info("replication")["role"])
    except redis.exceptions.RedisError:
        return ""


@dataclass(frozen=True)
class Storm:
    topology: str  # "sentinel" or "cluster"
    operations: int
    duration: float  # admissions spread over this; the kill comes at KILL_AT of it
    wait_replicas: int
    settle_timeout: float = 180.0
    kill_at: float = 0.4


@dataclass
class Outcome:
    acks: Acks = field(default_factory=Acks)
    killed_at: float = 0.0
    promoted_after_s: float | None = None
    report: dict[str, Any] = field(default_factory=dict)
    unsettled: dict[str, str] = field(default_factory=dict)
    ledger_problems: list[str] = field(default_factory=list)
    lost: audit.Losses = field(default_factory=audit.Losses)
    emails: dict[str, Any] = field(default_factory=dict)
    exited: list[str] = field(default_factory=list)


def build(topology: str) -> Topology:
    return SentinelTopology() if topology == "sentinel" else ClusterTopology()


def env_for(storm: Storm, topology: Topology, provider_url: str) -> dict[str, str]:
    env = {
        **service_env("", provider_url, "WARNING"),
        **topology.env,
        "RESETGATE_PROVIDER_KIND": PROVIDER,
        "RESETGATE_WAIT_REPLICAS": str(storm.wait_replicas),
        "RESETGATE_WAIT_TIMEOUT_MS": "500",
    }
    if not storm.wait_replicas:  # measured on purpose: the sender refuses it otherwise
        env["RESETGATE_KEYLESS_REQUIRE_REPLICA_WAIT"] = "false"
    return env


@asynccontextmanager
async def running(storm: Storm, log_dir: Path) -> AsyncIterator[tuple[Topology, Processes, str]]:
    topology = await asyncio.to_thread(build, storm.topology)
    async with AsyncExitStack() as stack:
        stack.callback(topology.stop)
        provider_url = await stack.enter_async_context(
            run_sandbox_process(mode=PROVIDER, log_level="WARNING", delivered_delay_seconds=1.0)
        )
        client = topology.client()
        stack.push_async_callback(client.aclose)
        await seed_directory(client, storm.operations)  # type: ignore[arg-type]
        processes = await stack.enter_async_context(
            Processes(log_dir, env_for(storm, topology, provider_url))
        )
        processes.add("admission")
        for name in ("sender-1", "sender-2"):
            processes.services[name] = ServiceProcess(
                name, {**processes.base_env, **SENDER_ENV}, log_dir, module="services.sender"
            )
        processes.add("poller", **POLLER_ENV)
        await asyncio.gather(*(s.start(90) for s in processes.services.values()))
        yield topology, processes, provider_url


async def run(storm: Storm, log_dir: Path) -> Outcome:
    print(f"failover storm {storm} logs={log_dir}", flush=True)
    outcome = Outcome()
    async with (
        asyncio.timeout(storm.duration + storm.settle_timeout + 240),
        running(storm, log_dir) as (topology, processes, provider_url),
    ):
        admission = processes["admission"].url + "/internal/v1/recovery-operations"
        storming = asyncio.create_task(drive(admission, storm, outcome.acks))
        await asyncio.sleep(storm.duration * storm.kill_at)
        await fail_over(topology, outcome)
        await storming
        outcome.exited = [n for n in SERVICES if not processes[n].running]
        await judge(topology, provider_url, storm, outcome)
    return outcome


async def fail_over(topology: Topology, outcome: Outcome) -> None:
    """Cut the replica off for LAG_S, SIGKILL the primary, wait for the promotion, bring
    the killed node back."""
    await asyncio.to_thread(topology.cut_replica)
    await asyncio.sleep(LAG_S)
    outcome.killed_at = time.monotonic()
    await asyncio.to_thread(topology.kill_primary)
    for _ in range(600):
        if await asyncio.to_thread(topology.promoted):
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError("no replica promoted within 60 s")
    outcome.promoted_after_s = round(time.monotonic() - outcome.killed_at, 2)
    await asyncio.to_thread(topology.restart_killed)


async def drive(url: str, storm: Storm, acks: Acks) -> None:
    """``storm.operations`` admissions, one per account, spread over ``storm.duration``."""
    limit = asyncio.Semaphore(CONCURRENCY)
    headers = {"Authorization": f"Bearer {INTERNAL_TOKEN}"}
    started = time.monotonic()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:

        async def one(index: int) -> None:
            async with limit:
                body = {
                    "account_id": account_id(index),
                    "entry_point": "agent",
                    "actor": "failover-storm",
                }
                await acknowledged(session, url, body, headers, acks)

        tasks = []
        for index in range(storm.operations):
            delay = started + index * storm.duration / storm.operations - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(index)))
        await asyncio.gather(*tasks)


async def acknowledged(
    session: aiohttp.ClientSession,
    url: str,
    body: dict[str, str],
    headers: dict[str, str],
    acks: Acks,
) -> None:
    deadline, backoff = time.monotonic() + 120, 0.1
    while time.monotonic() < deadline:
        try:
            async with session.post(url, json=body, headers=headers) as response:
                answer = await response.json(content_type=None)
                if response.status in (200, 201) and answer.get("operation_id"):
                    op = str(answer["operation_id"])
                    acks.operations[op] = (Channel.INTERNAL, time.monotonic())
                    acks.operation_of_account[body["account_id"]] = op
                    return
        except (aiohttp.ClientError, TimeoutError, ValueError):
            pass
        acks.retries += 1
        await asyncio.sleep(backoff)
        backoff = min(backoff * 2, 1.0)
    acks.gave_up += 1


async def settle(client: RedisClient, timeout: float) -> tuple[float, dict[str, str]]:
    started, left = time.monotonic(), {}
    while time.monotonic() - started < timeout:
        left = await audit.unsettled(client)  # type: ignore[arg-type]
        if not left:
            break
        await asyncio.sleep(1.0)
    return time.monotonic() - started, left


async def judge(topology: Topology, provider_url: str, storm: Storm, outcome: Outcome) -> None:
    client = topology.client()
    try:
        settle_s, outcome.unsettled = await settle(client, storm.settle_timeout)
        operations = await audit.scan_operations(client)  # type: ignore[arg-type]
        outcome.ledger_problems, tally = await audit.ledgers(client, operations)  # type: ignore[arg-type]
        outcome.lost = await audit.losses(
            client,
            outcome.acks,
            operations,
            {},  # type: ignore[arg-type]
            outcome.killed_at,
        )
        outcome.emails = await audit.emails(provider_url, operations)
        sent = (await sandbox_stats(provider_url))["sent_by_operation"]
    finally:
        await client.aclose()
    after = [at for _, at in outcome.acks.operations.values() if at > outcome.killed_at]
    outcome.report = {
        "topology": storm.topology,
        "wait_replicas": storm.wait_replicas,
        "acknowledged": len(outcome.acks.operations),
        "retries": outcome.acks.retries,
        "gave_up": outcome.acks.gave_up,
        "operations_in_store": len(operations),
        "lost_acknowledged": outcome.lost.total,
        "oldest_lost_ack_before_kill_s": max(outcome.lost.ages, default=None),
        "duplicate_sends": outcome.emails["duplicate_sends"],
        "max_emails_per_operation": outcome.emails["max_emails_per_operation"],
        # Postmark has no key: the sandbox's duplicate_sends (same key twice) cannot see these.
        "operations_emailed_twice": sum(1 for n in sent.values() if n > 1),
        "emails_for_forgotten_operations": outcome.emails["emails_for_forgotten_operations"],
        "accounts_emailed_twice": outcome.emails["accounts_emailed_twice"],
        "promoted_after_s": outcome.promoted_after_s,
        "acks_again_after_s": round(min(after) - outcome.killed_at, 2) if after else None,
        "handed_back_not_replicated": tally.get("attempt_transient", 0),
        "ledgers": dict(sorted(tally.items())),
        "settle_s": round(settle_s, 1),
        "unsettled": len(outcome.unsettled),
        "exited": outcome.exited,
    }
    print("failover report " + codec.dumps_str(outcome.report), flush=True)

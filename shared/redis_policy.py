"""Redis must not evict: operations, tokens and cooldowns live under TTLs, so a key that
``maxmemory-policy`` evicts is an operation lost without any error. Every service reads the
policy once it has a connection, exports it (``resetgate_redis_maxmemory_policy``) and warns
when it is not ``noeviction``. Managed Redis often refuses CONFIG GET: the policy is then
"unknown", which is logged and never fatal.

A provider without an idempotency key (SendGrid, Postmark, Mailgun, SES) needs more: the
sender writes each attempt before it calls the provider, and a Redis host crash that loses
that write makes the operation look unsent, so it is sent again and nothing on the
provider's side absorbs the second send (the ``http`` contract's Idempotency-Key does).
Only ``appendonly yes`` with ``appendfsync always`` keeps an acknowledged write across a
host crash. The sender reads both at start (:func:`check_keyless_durability`): Redis that
reports anything else stops it, unless the operator accepts the risk
(``RESETGATE_KEYLESS_REQUIRE_FSYNC_ALWAYS=false``); a refused CONFIG GET cannot be
verified and is a loud warning. Either way ``resetgate_send_twice_exposure`` says so.

Replicas are the same risk seen from a failover: replication is asynchronous, so a promoted
replica may never have seen an attempt that went out. With replicas behind the primary (or
Sentinel configured) and a keyless provider, the sender needs ``RESETGATE_WAIT_REPLICAS`` of
at least one, so every attempt is on a replica before the provider call
(:func:`check_keyless_replication`); ``RESETGATE_KEYLESS_REQUIRE_REPLICA_WAIT=false``
accepts the risk instead.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from redis.asyncio import RedisCluster
from redis.exceptions import RedisError

from shared import metrics
from shared.logging import event

log = logging.getLogger(__name__)

SAFE = "noeviction"
UNKNOWN = "unknown"


FSYNC_ALWAYS = "always"
AOF_OFF = "off"  # appendonly no: appendfsync does not apply, nothing is logged


def _nodes(answer: Any, name: str) -> list[dict[str, Any]]:
    """The CONFIG GET answers holding ``name``: one dict, or one per Cluster node."""
    if isinstance(answer, dict) and name in answer:
        return [answer]
    if isinstance(answer, dict):
        return [node for value in answer.values() for node in _nodes(value, name)]
    return []


async def _config(client: Any, pattern: str, name: str) -> list[dict[str, Any]] | None:
    """Every node's CONFIG GET answer holding ``name``; None when Redis refuses it."""
    try:
        return _nodes(await client.config_get(pattern), name)
    except (RedisError, OSError):
        return None


async def maxmemory_policy(client: Any) -> str:
    """Redis's maxmemory-policy (the unsafe one when Cluster nodes disagree), or unknown."""
    nodes = await _config(client, "maxmemory-policy", "maxmemory-policy")
    if nodes is None:
        return UNKNOWN
    found = {str(node["maxmemory-policy"]) for node in nodes}
    unsafe = sorted(found - {SAFE})
    if unsafe:
        return unsafe[0]
    return SAFE if found else UNKNOWN


async def check_eviction_policy(client: Any) -> str:
    """Export the policy and warn unless it is noeviction; returns it."""
    policy = await maxmemory_policy(client)
    metrics.redis_maxmemory_policy.labels(policy).set(1)
    if policy == UNKNOWN:
        event(log, logging.WARNING, "cannot read redis maxmemory-policy; check it is noeviction")
    elif policy != SAFE:
        event(
            log,
            logging.WARNING,
            "redis maxmemory-policy evicts keys: operations can vanish; set noeviction",
            policy=policy,
        )
    return policy


async def appendfsync(client: Any) -> str:
    """``always`` when every node keeps an acknowledged write across a host crash; else the
    weakest node's appendfsync, ``off`` when AOF is off, or unknown (CONFIG GET refused)."""
    nodes = await _config(client, "append*", "appendfsync")
    if not nodes:
        return UNKNOWN
    found = {
        str(node["appendfsync"]) if node.get("appendonly") == "yes" else AOF_OFF for node in nodes
    }
    weaker = sorted(found - {FSYNC_ALWAYS})
    return weaker[0] if weaker else FSYNC_ALWAYS


class StoreNotDurable(Exception):
    """Redis says it can lose an acknowledged write, and a keyless provider is configured."""


async def check_keyless_durability(client: Any, keyless: Mapping[str, str], require: bool) -> str:
    """Read appendfsync when ``keyless`` (provider name -> kind) names providers without an
    idempotency key; export
    the exposure per provider, warn, and raise :class:`StoreNotDurable` when Redis reports
    a policy other than ``always`` and ``require`` is set. Returns the policy ("" when no
    provider needs it)."""
    if not keyless:
        return ""
    policy = await appendfsync(client)
    named = ", ".join(
        name if name == kind else f"{name} ({kind})" for name, kind in keyless.items()
    )
    for name in keyless:
        metrics.send_twice_exposure.labels(name, policy).set(0 if policy == FSYNC_ALWAYS else 1)
    if policy == FSYNC_ALWAYS:
        return policy
    if policy != UNKNOWN and require:
        raise StoreNotDurable(
            f"Redis reports {_described(policy)}, and provider(s) {named} have no "
            "idempotency key: a Redis host crash could send a player's email twice. Run Redis "
            "with appendonly yes and appendfsync always, or set "
            "RESETGATE_KEYLESS_REQUIRE_FSYNC_ALWAYS=false to accept that risk"
        )
    event(
        log,
        logging.ERROR,
        "a Redis host crash could send emails twice: providers without an idempotency key "
        "need appendonly yes with appendfsync always"
        + ("; cannot read it (CONFIG GET refused), check by hand" if policy == UNKNOWN else ""),
        appendfsync=policy,
        providers=named,
    )
    return policy


def _described(policy: str) -> str:
    return "appendonly no" if policy == AOF_OFF else f"appendfsync {policy}"


async def replica_count(client: Any) -> int | None:
    """The most replicas any primary reports (INFO replication); None when INFO is refused."""
    try:
        if isinstance(client, RedisCluster):
            answer = await client.info("replication", target_nodes=RedisCluster.PRIMARIES)
        else:
            answer = await client.info("replication")
    except (RedisError, OSError):
        return None
    return max((int(n["connected_slaves"]) for n in _nodes(answer, "connected_slaves")), default=0)


async def check_keyless_replication(
    client: Any, keyless: Mapping[str, str], wait_replicas: int, *, sentinel: bool, require: bool
) -> int | None:
    """Raise :class:`StoreNotDurable` when keyless providers are configured, replicas exist
    (or Sentinel is configured: a failover is its purpose) and the sender would not WAIT for
    them, unless ``require`` is off (then an error line). Returns the replicas seen."""
    if not keyless:
        return None
    replicas = await replica_count(client)
    if wait_replicas or not (sentinel or replicas):
        return replicas
    named = ", ".join(keyless)
    where = "Sentinel is configured" if sentinel else f"Redis reports {replicas} replica(s)"
    if require:
        raise StoreNotDurable(
            f"{where}, RESETGATE_WAIT_REPLICAS is 0, and provider(s) {named} have no "
            "idempotency key: a failover to a replica that missed an attempt could send a "
            "player's email twice. Set RESETGATE_WAIT_REPLICAS=1 (or more), or set "
            "RESETGATE_KEYLESS_REQUIRE_REPLICA_WAIT=false to accept that risk"
        )
    event(
        log,
        logging.ERROR,
        "a Redis failover could send emails twice: set RESETGATE_WAIT_REPLICAS for "
        "providers without an idempotency key",
        replicas=replicas,
        providers=named,
    )
    return replicas

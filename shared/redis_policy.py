"""Redis must not evict: operations, tokens and cooldowns live under TTLs, so a key that
``maxmemory-policy`` evicts is an operation lost without any error. Every service reads the
policy once it has a connection, exports it (``resetgate_redis_maxmemory_policy``) and warns
when it is not ``noeviction``. Managed Redis often refuses CONFIG GET: the policy is then
"unknown", which is logged and never fatal.
"""

from __future__ import annotations

import logging
from typing import Any

from redis.exceptions import RedisError

from shared import metrics
from shared.logging import event

log = logging.getLogger(__name__)

SAFE = "noeviction"
UNKNOWN = "unknown"


def _policies(answer: Any) -> set[str]:
    """The policy values in a CONFIG GET answer: one dict, or one per Cluster node."""
    if isinstance(answer, dict) and "maxmemory-policy" in answer:
        return {str(answer["maxmemory-policy"])}
    if isinstance(answer, dict):
        return set().union(*(_policies(node) for node in answer.values()))
    return set()


async def maxmemory_policy(client: Any) -> str:
    """Redis's maxmemory-policy (the unsafe one when Cluster nodes disagree), or unknown."""
    try:
        answer = await client.config_get("maxmemory-policy")
    except (RedisError, OSError):
        return UNKNOWN
    found = _policies(answer)
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

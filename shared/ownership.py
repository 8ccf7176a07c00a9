"""Which provider an operation belongs to: the one rule the sender, the switch, the CLI and
the console read.

A switch moves partitions, but an operation whose latest attempt is unresolved-ambiguous
stays with the provider that attempt went to: only that provider can say whether it took
the message, and sending through another one before it is proven unsent could be a second
email. A replay decided there is pinned there too (``pinned``, resolve_ambiguous.lua).
Everything else follows its partition's current provider from its next attempt.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.control import ControlState
from shared.keys import PartitionKeys
from shared.model import TERMINAL, Operation, State
from shared.redis import RedisClient


@dataclass(frozen=True, slots=True)
class Owner:
    provider: str
    why: str  # for on-call: why this provider and not another

    def describe(self) -> str:
        return f"{self.provider} ({self.why})"


def owner(operation: Operation, state: ControlState, default: str) -> Owner:
    """``default``: the first configured provider (it serves unassigned partitions)."""
    current = state.provider_for(operation.partition, default)
    if operation.state is State.AMBIGUOUS:
        held = operation.provider or default
        why = "holds its unresolved ambiguous attempt; it is settled there"
        return Owner(held, why if held == current else f"{why}, not at {current}")
    if operation.state in TERMINAL or operation.state is State.ATTEMPTING:
        return Owner(operation.provider or current, "its latest attempt went there")
    if operation.pinned:
        return Owner(operation.pinned, "its replay is sent only where it was decided")
    return Owner(current, "the partition's provider, from its next attempt")


@dataclass(frozen=True, slots=True)
class Held:
    operation_id: str
    partition: int
    owner: str  # the provider that holds its unresolved ambiguous attempt
    current: str  # the provider its partition sends through now


async def held_by_others(
    client: RedisClient, state: ControlState, partitions: int, default: str, limit: int = 1000
) -> list[Held]:
    """Ambiguous operations owned by a provider their partition no longer sends through
    (after a switch): they are settled there before anything moves. At most ``limit``."""
    found: list[Held] = []
    for p in range(partitions):
        ids = [str(i) for i in await client.zrange(PartitionKeys(p).ambiguous, 0, limit - 1)]
        current = state.provider_for(p, default)
        for operation_id, name in zip(ids, await owners(client, ids), strict=True):
            if (name or default) != current:
                found.append(Held(operation_id, p, name or default, current))
        if len(found) >= limit:
            return found[:limit]
    return found


async def owners(client: RedisClient, operation_ids: list[str]) -> list[str]:
    """Each operation's ``provider``: the provider its latest attempt went to ("" if none)."""
    if not operation_ids:
        return []
    async with client.pipeline(transaction=False) as pipe:
        for operation_id in operation_ids:
            pipe.hget(PartitionKeys.of(operation_id).operation(operation_id), "provider")
        return [str(name or "") for name in await pipe.execute()]

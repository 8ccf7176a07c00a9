"""What a storm left behind: outcomes by the store and by the sandbox, and Redis memory.

Used by ``benchmarks/storm.py``. Everything is read through the project's own keys module
and record readers, so a change of the stored shape is measured, not guessed.
"""

from __future__ import annotations

import os
import resource
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from redis.asyncio import Redis

from shared.keys import PartitionKeys, partition_of
from shared.model import Operation, Outcome, State
from shared.operation_views import decode_ledger
from tests.support.processes import ServiceProcess

BATCH = 1000


def cpu_seconds(pid: int) -> float:
    """utime + stime of a running process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def reaped_children_cpu() -> float:
    """CPU of every child this process has reaped so far (a stopped sender's whole life)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass
class StoreCounts:
    states: Counter[str] = field(default_factory=Counter)
    duplicates: int = 0  # operations with more than one attempt the provider accepted
    one_attempt: list[str] = field(default_factory=list)  # accepted at the first attempt

    @property
    def lost(self) -> int:
        """Operations that did not end accepted (missing, still live, exhausted, failed)."""
        return sum(n for state, n in self.states.items() if state != State.ACCEPTED)


def _accepted_attempts(rows: list[str], operation_id: str) -> int:
    return sum(
        1
        for attempt in decode_ledger(operation_id, rows)
        if attempt.outcome == Outcome.ACCEPTED or attempt.reconciled == "accepted"
    )


async def store_counts(client: Redis, ops: list[str]) -> StoreCounts:
    counts = StoreCounts()
    for start in range(0, len(ops), BATCH):
        chunk = ops[start : start + BATCH]
        async with client.pipeline(transaction=False) as pipe:
            for op in chunk:
                pk = PartitionKeys.of(op)
                pipe.hgetall(pk.operation(op))
                pipe.lrange(pk.attempts(op), 0, -1)
            replies = await pipe.execute()
        for op, raw, rows in zip(chunk, replies[::2], replies[1::2], strict=True):
            state = Operation.from_hash(op, raw).state if raw else "missing"
            counts.states[str(state)] += 1
            accepted = _accepted_attempts(rows, op)
            counts.duplicates += accepted > 1
            if state == State.ACCEPTED and len(rows) == 1:
                counts.one_attempt.append(op)
    return counts


def sandbox_counts(stats: dict[str, Any], ops: list[str]) -> tuple[int, int]:
    """(duplicates, lost) by the sandbox's own per-operation email counts."""
    sent = stats["sent_by_operation"]
    duplicates = sum(max(0, sent.get(op, 0) - 1) for op in ops)
    lost = sum(1 for op in ops if not sent.get(op))
    return duplicates, lost


@dataclass
class Memory:
    """Bytes per operation by MEMORY USAGE (key name, object and dict entry included)."""

    operations: int = 0
    operation_hash: float = 0.0
    ledger: float = 0.0
    account: float = 0.0
    observation: float = 0.0  # message map + observe zset entries, shared per partition
    indexes: float = 0.0  # the send stream and the live index, shared
    fields: float = 0.0
    encodings: Counter[str] = field(default_factory=Counter)

    @property
    def total(self) -> float:
        return self.operation_hash + self.ledger + self.account + self.observation + self.indexes


async def _usage(client: Redis, keys: list[str]) -> list[int]:
    sizes: list[int] = []
    for start in range(0, len(keys), BATCH):
        async with client.pipeline(transaction=False) as pipe:
            for key in keys[start : start + BATCH]:
                pipe.memory_usage(key, samples=0)
            sizes += [int(size or 0) for size in await pipe.execute()]
    return sizes


async def shared_memory(client: Redis, partitions: int, names: tuple[str, ...]) -> int:
    keys = [getattr(PartitionKeys(p), name) for p in range(partitions) for name in names]
    return sum(await _usage(client, keys))


async def _per_key(client: Redis, keys: list[str]) -> float:
    sizes = await _usage(client, keys)
    return sum(sizes) / len(sizes) if sizes else 0.0


async def _hash_shape(client: Redis, keys: list[str], memory: Memory) -> None:
    async with client.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.hlen(key)
            pipe.object("encoding", key)
        replies = await pipe.execute()
    memory.fields = sum(replies[::2]) / max(1, len(keys))
    memory.encodings.update(str(e) for e in replies[1::2])


QUEUED_SHARED = ("send", "live")
ACCEPTED_SHARED = ("messages", "observe")


async def memory_per_operation(
    client: Redis, ops: list[str], partitions: int, *, queued: bool, baseline: int = 0
) -> Memory:
    """Per operation in ``ops``: its own keys in full, the shared structures' share.

    ``queued``: the operations are waiting to be sent (the send streams and live indexes,
    less their ``baseline`` size when empty, are shared by every live operation); else they
    are accepted (the observation entries are theirs).
    """
    memory = Memory(operations=len(ops))
    if not ops:
        return memory
    account_ids = await _account_ids(client, ops)
    op_keys = [PartitionKeys.of(op).operation(op) for op in ops]
    memory.operation_hash = await _per_key(client, op_keys)
    memory.account = await _per_key(
        client, [PartitionKeys(partition_of(a, partitions)).account(a) for a in account_ids]
    )
    await _hash_shape(client, op_keys[:BATCH], memory)
    if queued:
        # The stream and the index are shared by every live operation, not just the sample.
        live = sum([await client.zcard(PartitionKeys(p).live) for p in range(partitions)])
        grown = await shared_memory(client, partitions, QUEUED_SHARED) - baseline
        memory.indexes = grown / max(1, live)
        return memory
    memory.ledger = await _per_key(client, [PartitionKeys.of(op).attempts(op) for op in ops])
    shared = await shared_memory(client, partitions, ACCEPTED_SHARED)
    memory.observation = shared / len(ops)
    return memory


async def _account_ids(client: Redis, ops: list[str]) -> list[str]:
    ids: list[str] = []
    for start in range(0, len(ops), BATCH):
        async with client.pipeline(transaction=False) as pipe:
            for op in ops[start : start + BATCH]:
                pipe.hget(PartitionKeys.of(op).operation(op), "account_id")
            ids += [str(a) for a in await pipe.execute() if a]
    return ids


def describe(memory: Memory) -> str:
    encodings = ", ".join(f"{n} {e}" for e, n in memory.encodings.most_common())
    parts = [
        f"operation hash {memory.operation_hash:.0f} B ({memory.fields:.1f} fields; {encodings})",
        f"ledger {memory.ledger:.0f} B" if memory.ledger else "",
        f"account record {memory.account:.0f} B",
        f"observation entries {memory.observation:.0f} B" if memory.observation else "",
        f"send stream + live index {memory.indexes:.0f} B" if memory.indexes else "",
    ]
    return " + ".join(p for p in parts if p)


async def reconciliations(poller: ServiceProcess) -> str:
    """How the poller settled the ambiguous attempts, from its own counters: the outcomes
    (``resetgate_reconciliations_total``) and how many of the accepted a pushed event proved
    (``resetgate_inbound_settled_total``; the rest were looked up)."""
    outcomes: Counter[str] = Counter()
    for family in text_string_to_metric_families(await poller.metrics_text()):
        if family.name == "resetgate_reconciliations":
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    outcomes[sample.labels["outcome"]] += int(sample.value)
    by_event = int(await poller.metric("resetgate_inbound_settled_total"))
    return f"ambiguous attempts reconciled {dict(outcomes)}, of them by a pushed event {by_event}"

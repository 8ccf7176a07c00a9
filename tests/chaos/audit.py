"""What a chaos run is judged on, read from the store and the sandbox after it settles.

- every operation in the store is terminal or held for review (after a bounded settle);
- no attempt ledger has a gap: attempt numbers 1..n in order, none left in flight;
- at most one email per operation really left the sandbox, and every attempt of an
  operation sent the same email (same token) under its key;
- one account, one operation; one contact form event, at most one support case;
- acknowledged-then-lost: what the driver was told was accepted and the store no longer has.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from redis.asyncio import Redis

from shared.keys import (
    CONTACT_FORMS,
    ROUTER_GROUP,
    ROUTER_RETRY,
    SUPPORT_CASES,
    PartitionKeys,
    partition_of,
)
from shared.model import TERMINAL, Attempt, State
from tests.chaos.driver import Acks
from tests.chaos.stack import PARTITIONS, account_id
from tests.support.keys import ANY_PARTITION
from tests.support.sandbox import sandbox_stats, sent_emails

SETTLED = frozenset({*TERMINAL, State.REVIEW})
# Reasons of attempts handed back unspent: the directory did not answer, the token key is
# missing, the begin did not reach the replicas in time (services/sender/attempt.py).
REFUNDED = frozenset({"directory_unavailable", "token_key_missing", "not_replicated"})
CHUNK = 1000


@dataclass
class Operation:
    operation_id: str
    state: str
    account_id: str
    attempts: int


async def scan_operations(redis: Redis) -> dict[str, Operation]:
    """Every operation hash in the store (attempt ledgers share the prefix: skipped)."""
    found = [
        key
        async for key in redis.scan_iter(match=ANY_PARTITION.operation("*"), count=5000)
        if not key.endswith(":attempts")
    ]
    operations: dict[str, Operation] = {}
    for start in range(0, len(found), CHUNK):
        async with redis.pipeline(transaction=False) as pipe:
            chunk = found[start : start + CHUNK]
            for key in chunk:
                pipe.hmget(key, ["state", "account_id", "attempts"])
            for key, (state, account, attempts) in zip(chunk, await pipe.execute(), strict=True):
                if state:  # the key is rg:{p}:op:<operation id>
                    op_id = key.rsplit(":", 1)[1]
                    operations[op_id] = Operation(op_id, state, account, int(attempts or 0))
    return operations


async def forms_pending(redis: Redis) -> int:
    """Forms not yet routed: pending in the group, taken over and waiting for a retry, plus
    one if any was never read. (The group's lag is not used: the router deletes forms it has
    read, and deletions void it.)"""
    groups = await redis.xinfo_groups(CONTACT_FORMS)
    group: dict[str, Any] = next((g for g in groups if g["name"] == ROUTER_GROUP), {})
    stream: dict[str, Any] = await redis.xinfo_stream(CONTACT_FORMS)
    unread = group.get("last-delivered-id") != stream.get("last-generated-id")
    retrying = int(await redis.zcard(ROUTER_RETRY))
    return int(group.get("pending") or 0) + retrying + int(unread)


async def unsettled(redis: Redis) -> dict[str, str]:
    operations = await scan_operations(redis)
    return {o.operation_id: o.state for o in operations.values() if o.state not in SETTLED}


async def settle(redis: Redis, timeout: float) -> tuple[float, dict[str, str]]:
    """Wait until every operation is settled and every form routed; (seconds, what is not)."""
    started = time.monotonic()
    left: dict[str, str] = {}
    while time.monotonic() - started < timeout:
        left = await unsettled(redis)
        if not left and not await forms_pending(redis):
            return time.monotonic() - started, {}
        await asyncio.sleep(1.0)
    return time.monotonic() - started, left


def ledger_problems(operation: Operation, rows: list[dict[str, Any]]) -> list[str]:
    """Gaps, reordering or in-flight leftovers in one ledger."""
    problems = []
    expected = 1
    for row in rows:
        if row.get("number") != expected:
            problems.append(
                f"{operation.operation_id}: attempt {row.get('number')} where "
                f"{expected} was expected"
            )
        if row.get("outcome") == "in_flight":
            problems.append(
                f"{operation.operation_id}: attempt {row.get('number')} left "
                f"in flight (state {operation.state})"
            )
        # A refunded attempt (no email could have left) gives its number to the next one.
        expected += 0 if row.get("reason") in REFUNDED else 1
    if expected - 1 != operation.attempts:
        problems.append(
            f"{operation.operation_id}: {operation.attempts} attempts counted, "
            f"{expected - 1} in the ledger"
        )
    return problems


async def ledgers(redis: Redis, operations: dict[str, Operation]) -> tuple[list[str], Counter[str]]:
    """(problems, a tally of what the ledgers hold: attempts by outcome, reconciliations)."""
    problems: list[str] = []
    tally: Counter[str] = Counter()
    ops = list(operations.values())
    for start in range(0, len(ops), CHUNK):
        async with redis.pipeline(transaction=False) as pipe:
            for op in ops[start : start + CHUNK]:
                pipe.lrange(PartitionKeys.of(op.operation_id).attempts(op.operation_id), 0, -1)
            for op, raw in zip(ops[start : start + CHUNK], await pipe.execute(), strict=True):
                rows = [asdict(Attempt.decode(r, i)) for i, r in enumerate(raw, 1)]
                problems += ledger_problems(op, rows)
                tally.update(_tally(rows))
    return problems, tally


def _tally(rows: list[dict[str, Any]]) -> Counter[str]:
    tally: Counter[str] = Counter(f"attempt_{row.get('outcome')}" for row in rows)
    tally.update("lease_expired" for row in rows if row.get("reason") == "lease_expired")
    tally.update(f"reconciled_{row['reconciled']}" for row in rows if row.get("reconciled"))
    return tally


async def cases_by_event(redis: Redis) -> dict[str, list[dict[str, str]]]:
    cases: dict[str, list[dict[str, str]]] = {}
    last = "-"
    while True:
        reply: Any = await redis.xrange(SUPPORT_CASES, min=last, max="+", count=5000)
        page = [(str(i), dict(fields)) for i, fields in reply if i != last]
        if not page:
            return cases
        for _, fields in page:
            cases.setdefault(fields["event_id"], []).append(fields)
        last = page[-1][0]


async def public_operation(redis: Redis, account: str, known: dict[str, Operation]) -> bool:
    pk = PartitionKeys(partition_of(account, PARTITIONS))
    return (await redis.hget(pk.account(account), "last") or "") in known


@dataclass
class Losses:
    """Acknowledged, then missing from the store; ages = seconds from the ack to the crash."""

    operations: int = 0
    public: int = 0
    forms: int = 0
    ages: list[float] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.operations + self.public + self.forms


async def losses(
    redis: Redis,
    acks: Acks,
    operations: dict[str, Operation],
    cases: dict[str, list[dict[str, str]]],
    crashed_at: float | None,
) -> Losses:
    lost = Losses()

    def age(acked_at: float) -> None:
        lost.ages.append(round((crashed_at or acked_at) - acked_at, 3))

    for op_id, (_, acked_at) in acks.operations.items():
        if op_id not in operations:
            lost.operations += 1
            age(acked_at)
    for account, acked_at in acks.public.items():
        if not await public_operation(redis, account, operations):
            lost.public += 1
            age(acked_at)
    for event_id, (_, acked_at) in acks.forms.items():
        if event_id not in cases:
            lost.forms += 1
            age(acked_at)
    return lost


def convergence_problems(
    acks: Acks, operations: dict[str, Operation], cases: dict[str, list[dict[str, str]]]
) -> list[str]:
    """One account, one operation; one event, one case; a form converges on the account's
    operation when the driver already knew it."""
    problems = []
    per_account = Counter(op.account_id for op in operations.values())
    problems += [f"account {a} has {n} operations" for a, n in per_account.items() if n > 1]
    problems += [f"event {e} has {len(c)} cases" for e, c in cases.items() if len(c) > 1]
    for event_id, (account, _) in acks.forms.items():
        known = acks.operation_of_account.get(account)
        found = cases.get(event_id)
        if known in operations and found and found[0].get("operation_id") != known:
            problems.append(f"event {event_id} attached to another operation than {known}")
    return problems


async def emailed_twice(
    provider_url: str, forgotten: list[str], sent: dict[str, int], operations: dict[str, Operation]
) -> int:
    """Accounts that got an email for an operation the store forgot *and* one for the
    operation a later request created: the player-visible cost of a lost acknowledgement."""
    emailed = {op.account_id for op in operations.values() if sent.get(op.operation_id)}
    twice = 0
    for operation_id in forgotten:
        for message in await sent_emails(provider_url, operation_id=operation_id):
            address = str(message["email"]["to"][0])
            twice += account_id(int(address.split("@")[0].removeprefix("c"))) in emailed
    return twice


async def emails(provider_url: str, operations: dict[str, Operation]) -> dict[str, Any]:
    stats = await sandbox_stats(provider_url)
    sent: dict[str, int] = stats["sent_by_operation"]
    forgotten = [op for op in sent if op not in operations]
    return {
        "emails_sent": stats["emails_sent_total"],
        "duplicate_sends": stats["duplicate_sends_total"],
        "max_emails_per_operation": max(sent.values(), default=0),
        "operations_sent_twice": sorted(op for op, n in sent.items() if n > 1)[:10],
        # Same key, different body: a retry would have carried another token.
        "idempotency_body_mismatches": stats["idempotency_body_mismatches_total"],
        # Emails the provider sent for operations the store no longer has (lost in a crash).
        "emails_for_forgotten_operations": len(forgotten),
        "accounts_emailed_twice": await emailed_twice(provider_url, forgotten, sent, operations),
        "injected": {
            "5xx": stats["injected_errors_total"],
            "dropped": stats["dropped_connections_total"],
            "slow": stats["slow_responses_total"],
            "replayed_by_key": stats["replays_total"],
            "409_in_flight": stats["conflicts_total"],
        },
    }

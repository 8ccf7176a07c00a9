"""Every state-writing script, run from every state on a real Redis, moves an operation only
along shared/model.py TRANSITIONS: the table is the truth the scripts obey.

Each case seeds one operation in a given state (as the scripts store it: a token valid for
an hour, a horizon a day away, an attempt in flight whose lease has run out, due now), runs
one script the way its caller does, and records (before -> after).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from services.admission.tokens import consume
from shared import ids
from shared.keys import PartitionKeys
from shared.model import TRANSITIONS, State, on_token_consumed
from shared.operations import promote_due
from shared.scripts.attempts import (
    BeginAttempt,
    Finalisation,
    FinaliseAttempt,
    HoldRefused,
    Quarantine,
    ResolveAmbiguous,
)
from shared.tokens import TokenKeys

NOW = 1_800_000_000_000
HOUR = 3_600_000
ATTEMPT = "att-in-flight"
Action = Callable[[Redis, str, TokenKeys], Awaitable[Any]]


async def seed(client: Redis, state: State) -> str:
    operation_id = ids.operation_id(1, NOW - 1000)
    pk = PartitionKeys.of(operation_id)
    await client.hset(
        pk.operation(operation_id),
        mapping={
            "account_id": "acct-1",
            "state": str(state),
            "token_kid": "k2",
            "token_expires_at": NOW + HOUR,
            "horizon_at": NOW + 24 * HOUR,
            "attempts": 1,
            "attempt_id": ATTEMPT,
            "lease_until": NOW - 1,
        },
    )
    await client.hset(pk.account("acct-1"), "last", operation_id)
    await client.zadd(pk.due, {operation_id: NOW - 1})
    await client.zadd(pk.live, {operation_id: NOW - 1000})
    return operation_id


def _begin(now: int, max_attempts: int = 5) -> Action:
    async def run(client: Redis, op: str, _: TokenKeys) -> Any:
        return await BeginAttempt(
            operation_id=op,
            attempt_id=ids.attempt_id(),
            now=now,
            lease_ms=30_000,
            max_attempts=max_attempts,
            consumer="c1",
            entry_id="",
            retention_ms=HOUR,
        ).run(client)

    return run


def _finalise(goal: State) -> Action:
    async def run(client: Redis, op: str, _: TokenKeys) -> Any:
        result = Finalisation(
            outcome="accepted",
            http_status=200,
            next_state=str(goal),
            retry_at=NOW + 1000,
            message_id="msg-1",
            observe_until=NOW + HOUR,
        )
        try:
            return await FinaliseAttempt(
                operation_id=op,
                attempt_id=ATTEMPT,
                now=NOW,
                entry_id="",
                result=result,
                retention_ms=HOUR,
            ).run(client)
        except ResponseError as error:  # the script refuses a target the table forbids
            assert "illegal transition" in str(error)
            return None

    return run


def _resolve(decision: str) -> Action:
    async def run(client: Redis, op: str, _: TokenKeys) -> Any:
        return await ResolveAmbiguous(
            operation_id=op,
            now=NOW,
            decision=decision,
            message_id="msg-1",
            observe_until=NOW + HOUR,
            reason="test",
            retention_ms=HOUR,
        ).run(client)

    return run


def _quarantine(action: str) -> Action:
    async def run(client: Redis, op: str, _: TokenKeys) -> Any:
        request = Quarantine(
            operation_id=op, action=action, now=NOW, reason="test", retention_ms=HOUR
        )
        return await request.run(client)

    return run


async def _promote(client: Redis, op: str, _: TokenKeys) -> Any:
    return await promote_due(client, PartitionKeys.of(op).partition, NOW)


async def _hold_refused(client: Redis, op: str, _: TokenKeys) -> Any:
    key = PartitionKeys.of(op).operation(op)
    await client.hset(key, mapping={"last_outcome": "permanent", "reason": "error_code_9001"})
    return await HoldRefused(
        operation_id=op, now=NOW, reason="error_code_9001", note="provider_paused_refusals"
    ).run(client)


async def _consume(client: Redis, op: str, keys: TokenKeys) -> Any:
    return await consume(client, keys, 4, op, keys.derive(op, "k2"))


ACTIONS: dict[str, Action] = {
    "begin_attempt": _begin(NOW),
    "begin_attempt (token expired)": _begin(NOW + 2 * HOUR),
    "begin_attempt (max attempts)": _begin(NOW, max_attempts=1),
    "begin_attempt (horizon)": _begin(NOW + 25 * HOUR),
    **{f"finalise_attempt -> {goal}": _finalise(goal) for goal in State},
    **{f"resolve_ambiguous {d}": _resolve(d) for d in ("accepted", "replay", "review")},
    "quarantine quarantine": _quarantine("quarantine"),
    "quarantine release": _quarantine("release"),
    "quarantine close": _quarantine("close"),
    "promote_due": _promote,
    "consume_token": _consume,
    "hold_refused": _hold_refused,
}


async def moves(client: Redis, keys: TokenKeys) -> set[tuple[str, State, State]]:
    seen: set[tuple[str, State, State]] = set()
    for name, action in ACTIONS.items():
        for before in State:
            await client.flushall()
            operation_id = await seed(client, before)
            await action(client, operation_id, keys)
            key = PartitionKeys.of(operation_id).operation(operation_id)
            after = State(await client.hget(key, "state"))
            if after is not before:
                seen.add((name, before, after))
    return seen


async def test_every_script_moves_only_along_the_table(redis: Redis, token_keys: TokenKeys) -> None:
    seen = await moves(redis, token_keys)
    illegal = sorted(
        f"{name}: {before} -> {after}"
        for name, before, after in seen
        if after not in TRANSITIONS[before]
    )
    assert not illegal, illegal
    # The cases really ran: each script moved some state, and every transition the
    # scripts are known to make was seen (a script that stopped writing would fail here).
    assert {name.split(" ")[0] for name, _, _ in seen} == {
        "begin_attempt",
        "finalise_attempt",
        "resolve_ambiguous",
        "quarantine",
        "promote_due",
        "consume_token",
        "hold_refused",
    }
    pairs = {(before, after) for _, before, after in seen}
    assert (State.QUEUED, State.ATTEMPTING) in pairs
    assert (State.ATTEMPTING, State.AMBIGUOUS) in pairs
    assert (State.DEFERRED, State.QUEUED) in pairs
    assert ("hold_refused", State.DEFERRED, State.REVIEW) in seen  # the guard's moves
    assert ("hold_refused", State.QUEUED, State.REVIEW) in seen
    assert {(b, a) for n, b, a in seen if n == "quarantine close"} == {(State.REVIEW, State.FAILED)}
    assert pairs >= {(State.ATTEMPTING, goal) for goal in TRANSITIONS[State.ATTEMPTING]}


async def test_a_used_token_closes_each_live_state_as_the_table_says(
    redis: Redis, token_keys: TokenKeys
) -> None:
    for before in State:
        await redis.flushall()
        operation_id = await seed(redis, before)
        await _consume(redis, operation_id, token_keys)
        after = State(
            await redis.hget(PartitionKeys.of(operation_id).operation(operation_id), "state")
        )
        assert after is (on_token_consumed(before) or before), before


def test_the_documented_state_diagram_is_the_table() -> None:
    tool = Path(__file__).resolve().parents[2] / "tools" / "state_diagram.py"
    run = subprocess.run([sys.executable, str(tool), "--check"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr

"""The read side: one operation with its ledger, an account's operation, the oldest live ones."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from shared import codec
from shared.directory import Account
from shared.keys import PartitionKeys, partition_of
from shared.model import LEDGER_FIELDS
from tests.admission.helpers import BEARER, internal_admit, seed_directory

ACCOUNTS = [(f"player{i}", Account(f"acct-{i}", f"p{i}@example.com")) for i in range(8)]


async def test_an_operation_shows_its_ledger_budget_and_delivery(
    api: TestClient[Any, Any], redis: Redis
) -> None:
    await seed_directory(redis, *ACCOUNTS)
    op = (await (await internal_admit(api, "acct-3")).json())["operation_id"]
    pk = PartitionKeys(partition_of("acct-3", 4))
    # What the sender writes: two attempts in the ledger, one unreadable row.
    rows = [
        {
            "attempt_id": "at-1",
            "started_at": 1,
            "ended_at": 2,
            "outcome": "throttled",
            "http_status": 429,
            "decision": "retry",
            "retry_at": 5000,
        },
        {"attempt_id": "at-2", "started_at": 6000, "outcome": "in_flight"},
    ]
    compact = (codec.dumps_str([r.get(name) for name in LEDGER_FIELDS]) for r in rows)
    await redis.rpush(pk.attempts(op), *compact, "{not json")
    fields = {"attempts": 2, "state": "attempting", "last_status": 429, "next_attempt_at": 5000}
    await redis.hset(pk.operation(op), mapping=fields)
    view = await (await api.get(f"/internal/v1/recovery-operations/{op}", headers=BEARER)).json()
    assert view["state"] == "attempting"
    assert view["attempts"] == 2 and view["remaining_attempts"] == 4  # max_attempts 6
    assert view["next_attempt_at"] == 5000 and view["last_status"] == 429
    assert view["delivery"] == "unknown"
    assert [a["attempt_id"] for a in view["attempt_ledger"]] == ["at-1", "at-2"]
    assert view["attempt_ledger"][0]["retry_at"] == 5000
    assert view["entry_points"] == {"agent": 1}
    by_account = await api.get("/internal/v1/accounts/acct-3/recovery-operation", headers=BEARER)
    assert (await by_account.json())["operation_id"] == op


async def test_the_oldest_live_operations_across_partitions_one_row_each(
    api: TestClient[Any, Any], redis: Redis
) -> None:
    await seed_directory(redis, *ACCOUNTS)
    created = []
    for _, account in ACCOUNTS:
        reply = await (await internal_admit(api, account.account_id)).json()
        created.append(reply["operation_id"])
    partitions = {partition_of(a.account_id, 4) for _, a in ACCOUNTS}
    assert len(partitions) > 1  # the merge is across partitions
    # Age them explicitly: the created order must come back, oldest first.
    for rank, (op, (_, account)) in enumerate(zip(created, ACCOUNTS, strict=True)):
        pk = PartitionKeys(partition_of(account.account_id, 4))
        await redis.zadd(pk.live, {op: 1_000 + rank})
    done = PartitionKeys(partition_of("acct-0", 4))
    await redis.zrem(done.live, created[0])  # terminal: no longer live
    reply = await api.get("/internal/v1/recovery-operations?oldest=3", headers=BEARER)
    body = await reply.json()
    assert body["count"] == 3
    assert [r["operation_id"] for r in body["operations"]] == created[1:4]
    row = body["operations"][0]
    assert row["remaining_attempts"] == 6 and row["state"] == "queued"
    assert row["next_attempt_at"] is not None and row["age_seconds"] > 0
    everything = await (await api.get("/internal/v1/recovery-operations", headers=BEARER)).json()
    assert everything["count"] == 7
    for bad in ("0", "1001", "abc", "-1", "²"):
        refused = await api.get(f"/internal/v1/recovery-operations?oldest={bad}", headers=BEARER)
        assert refused.status == 422, bad

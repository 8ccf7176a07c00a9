"""docs/design.md invariants 1, 2 and 9 through the HTTP API, against a real Redis."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from shared.admit import Admitter
from shared.keys import PartitionKeys, partition_of
from shared.tokens import parse_keys
from tests.admission.helpers import (
    ALICE,
    BEARER,
    admission_settings,
    consume,
    internal_admit,
    public,
    seed_directory,
    serving,
)
from tests.conftest import TEST_TOKEN_KEYS

ALICE_ID = ALICE[1].account_id


def keys_of(account_id: str) -> PartitionKeys:
    return PartitionKeys(partition_of(account_id, 4))


async def test_one_intent_one_operation_one_token_across_all_entry_points(
    api: TestClient[Any, Any], redis: Redis, redis_server: Any
) -> None:
    """The seed scenario: a request, four resends, a contact form and an agent, at once."""
    first = await public(api, ALICE[0])
    assert first.status == 202
    router = Admitter(redis, admission_settings(redis_server.url), parse_keys(TEST_TOKEN_KEYS))
    replies = await asyncio.gather(
        *(public(api, ALICE[0]) for _ in range(4)),
        router.admit(ALICE_ID, "contact_form"),
        internal_admit(api, ALICE_ID, "agent", "ann"),
    )
    assert [r.status for r in replies[:4]] == [202] * 4
    agent = await replies[5].json()
    pk = keys_of(ALICE_ID)
    live = await redis.zrange(pk.live, 0, -1)
    assert live == [agent["operation_id"]] == [replies[4].operation_id]
    assert await redis.xlen(pk.send) == 1
    counters = {
        k: int(v)
        for k, v in (await redis.hgetall(pk.operation(live[0]))).items()
        if k.startswith("ep:")
    }
    # The creating request plus every convergence: nothing was dropped, nothing duplicated.
    assert counters == {"ep:public": 5, "ep:contact_form": 1, "ep:agent": 1}
    token = parse_keys(TEST_TOKEN_KEYS).derive(live[0])
    assert (await consume(api, live[0], token)).status == 200


async def test_200_concurrent_internal_admissions_make_one_operation_one_job(
    api: TestClient[Any, Any], redis: Redis
) -> None:
    connector = aiohttp.TCPConnector(limit=0, force_close=True)  # one connection per request
    async with aiohttp.ClientSession(connector=connector) as session:
        url = str(api.make_url("/internal/v1/recovery-operations"))
        body = {"account_id": ALICE_ID, "entry_point": "automation"}

        async def admit() -> tuple[int, dict[str, Any]]:
            async with session.post(url, json=body, headers=BEARER) as response:
                return response.status, await response.json()

        results = await asyncio.gather(*(admit() for _ in range(200)))
    assert {r["operation_id"] for _, r in results} == {results[0][1]["operation_id"]}
    assert sorted(status for status, _ in results) == [200] * 199 + [201]
    assert sum(r["created"] for _, r in results) == 1
    assert await redis.xlen(keys_of(ALICE_ID).send) == 1


async def test_cooldown_rejection_creates_no_job_and_a_new_intent_gets_a_new_token(
    redis: Redis, redis_server: Any
) -> None:
    await seed_directory(redis)
    settings = admission_settings(redis_server.url, cooldown_seconds=1)
    token_keys = parse_keys(TEST_TOKEN_KEYS)
    pk = keys_of(ALICE_ID)
    async with serving(settings) as http:
        first = await (await internal_admit(http, ALICE_ID)).json()
        # The player uses the link: terminal state, the account has no live operation.
        used = await consume(http, first["operation_id"], token_keys.derive(first["operation_id"]))
        assert used.status == 200
        inside = await (await internal_admit(http, ALICE_ID)).json()
        assert inside["result"] == "cooldown" and inside["operation_id"] == first["operation_id"]
        assert (await public(http, ALICE[0])).status == 202
        assert await redis.xlen(pk.send) == 1  # cooldown: no queue work
        await asyncio.sleep(1.05)
        again = await (await internal_admit(http, ALICE_ID)).json()
    assert again["created"] is True
    assert again["operation_id"] != first["operation_id"]
    assert token_keys.derive(again["operation_id"]) != token_keys.derive(first["operation_id"])
    assert await redis.xlen(pk.send) == 2


async def test_public_answers_are_byte_identical_whatever_the_login(
    redis: Redis, redis_server: Any
) -> None:
    await seed_directory(redis)
    token_keys = parse_keys(TEST_TOKEN_KEYS)
    async with serving(admission_settings(redis_server.url)) as http:
        answers = {}
        answers["new"] = await public(http, ALICE[0])
        answers["converged"] = await public(http, ALICE[0])
        op = (await (await internal_admit(http, ALICE_ID)).json())["operation_id"]
        await consume(http, op, token_keys.derive(op))
        answers["cooldown"] = await public(http, ALICE[0])
        answers["unknown"] = await public(http, "nobody@example.net")
        answers["unknown-plain"] = await public(http, "  ")
        seen = {
            (r.status, r.headers["Content-Type"], r.headers["Content-Length"], await r.read())
            for r in answers.values()
        }
    assert seen == {(202, "application/json", "21", b'{"status":"received"}')}
    assert (await redis.hgetall(keys_of(ALICE_ID).operation(op)))["ep:public"] == "3"


async def test_every_public_answer_costs_the_same_commands(redis: Redis, redis_server: Any) -> None:
    """Invariant 9's timing half, structurally: unknown, new, converged and cooldown send
    Redis the same commands in the same order (MONITOR sees what clients send)."""
    await seed_directory(redis)
    token_keys = parse_keys(TEST_TOKEN_KEYS)
    settings = admission_settings(redis_server.url, ip_limit_per_minute=600, ip_limit_burst=50)
    seen: list[str] = []
    watcher = Redis.from_url(redis_server.url, decode_responses=True)

    async def watch() -> None:
        async with watcher.monitor() as monitor:
            while True:
                command = await monitor.next_command()
                if command["client_type"] != "lua":
                    seen.append(command["command"])

    async def fence(name: str) -> None:
        """MONITOR shows commands in the order Redis ran them, so once our ECHO shows up
        everything sent before it has too: no sleep decides where one answer's commands end.
        Sent again until seen, since the first may run before MONITOR itself."""
        for attempt in range(50):
            await redis.echo(f"{name}-{attempt}")
            for _ in range(20):
                await asyncio.sleep(0.01)
                if f"ECHO {name}-{attempt}" in seen:
                    return
        raise AssertionError(f"MONITOR never showed the fence {name}")

    task = asyncio.create_task(watch())
    await fence("started")

    async def commands_of(login: str) -> list[str]:
        await fence(f"before-{login}")
        seen.clear()
        assert (await public(http, login)).status == 202
        await fence(f"after-{login}")
        return [command.split()[0].upper() for command in seen if not command.startswith("ECHO ")]

    async with serving(settings) as http:
        await commands_of("warm-up")  # the first call after a Redis start loads the scripts
        kinds = {"new": await commands_of(ALICE[0]), "converged": await commands_of(ALICE[0])}
        op = (await (await internal_admit(http, ALICE_ID)).json())["operation_id"]
        await consume(http, op, token_keys.derive(op))
        kinds["cooldown"] = await commands_of(ALICE[0])
        kinds["unknown"] = await commands_of("nobody@example.com")
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await watcher.aclose()
    assert kinds["new"] == ["EVALSHA", "GET", "HGETALL", "HMGET", "EVALSHA"], kinds
    assert kinds["converged"] == kinds["cooldown"] == kinds["unknown"] == kinds["new"], kinds

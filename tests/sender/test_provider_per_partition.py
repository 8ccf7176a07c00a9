"""Each partition sends through its own provider (two real sandboxes), every attempt names
the provider it went to, and a switch mid-run sends nothing twice."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import REGISTRY
from redis.asyncio import Redis

from shared import clock, control, switch
from shared.model import State
from shared.operations import load_attempts, load_operation
from shared.scripts.attempts import BeginAttempt, BeginCode
from tests.sender.conftest import Stack, wait_for
from tests.support.sandbox import SANDBOX_API_KEY, configure, run_sandbox, sent_emails

pytestmark = pytest.mark.cluster_pass  # also on a Redis Cluster: make test-cluster

NAMES = ["primary", "standby"]


def named_env(urls: dict[str, str]) -> dict[str, str]:
    env = {"RESETGATE_PROVIDERS": ",".join(NAMES)}
    for name, url in urls.items():
        infix = f"RESETGATE_PROVIDER_{name.upper()}"
        env |= {f"{infix}_KIND": "http", f"{infix}_URL": url, f"{infix}_API_KEY": SANDBOX_API_KEY}
    return env


async def move(redis: Redis, partitions: list[int], to: str) -> None:
    plan = await switch.begin(redis, dict.fromkeys(partitions, to), NAMES)
    assert await switch.settle(redis, plan, 30) == {}
    await switch.finish(redis, plan, NAMES)


async def emails(urls: dict[str, str], operation_id: str) -> dict[str, int]:
    return {n: len(await sent_emails(u, operation_id=operation_id)) for n, u in urls.items()}


async def test_each_partition_sends_through_its_provider_and_the_ledger_names_it(
    stack: Stack,
) -> None:
    async with run_sandbox(delivered_delay_seconds=0.2) as standby_url:
        urls = {"primary": stack.provider_url, "standby": standby_url}
        await move(stack.redis, [0, 1], "standby")
        ops = [await stack.admit(f"acct-{i}") for i in range(12)]
        async with stack.sender(named=named_env(urls)) as sender:
            for op in ops:
                await stack.wait_state(op, {State.ACCEPTED})
            await sender.refresh_control()
            exported = REGISTRY.get_sample_value(
                "resetgate_partition_provider", {"partition": "1", "provider": "standby"}
            )
            assert exported == 1
        state = await control.read(stack.redis)
        for op in ops:
            operation = await load_operation(stack.redis, op)
            assert operation is not None
            expected = state.provider_for(operation.partition, "primary")
            others = {n: 0 for n in NAMES if n != expected}
            assert await emails(urls, op) == {expected: 1, **others}
            assert operation.provider == expected
            assert [a.provider for a in await load_attempts(stack.redis, op)] == [expected]
        assert {state.provider_for(p, "primary") for p in range(4)} == set(NAMES)


async def test_a_switch_mid_run_sends_every_operation_exactly_once(stack: Stack) -> None:
    async with run_sandbox(delivered_delay_seconds=0.2) as standby_url:
        urls = {"primary": stack.provider_url, "standby": standby_url}
        async with stack.sender(named=named_env(urls)):
            first = [await stack.admit(f"early-{i}") for i in range(20)]
            await move(stack.redis, [0, 1], "standby")  # while the first wave is sending
            second = [await stack.admit(f"late-{i}") for i in range(20)]
            await move(stack.redis, [0], "primary")
            third = [await stack.admit(f"last-{i}") for i in range(10)]
            for op in first + second + third:
                await stack.wait_state(op, {State.ACCEPTED})
        used = dict.fromkeys(NAMES, 0)
        for op in first + second + third:
            counts = await emails(urls, op)
            assert sum(counts.values()) == 1, (op, counts)
            operation = await load_operation(stack.redis, op)
            assert operation is not None and counts[operation.provider] == 1
            used[operation.provider] += 1
        assert all(used.values()), used  # the switches really moved work between them


async def test_failover_moves_partitions_away_from_a_provider_whose_key_is_rejected(
    stack: Stack,
) -> None:
    # The failover the credentials page suggests: primary answers 401 (its key revoked), the
    # partitions it serves wait; switched to standby they are sent there, each once.
    await configure(stack.provider_url, revoked_status=401)
    async with run_sandbox(delivered_delay_seconds=0.2) as standby_url:
        urls = {"primary": stack.provider_url, "standby": standby_url}
        async with stack.sender(named=named_env(urls)):
            ops = [await stack.admit(f"failover-{i}") for i in range(12)]
            await wait_for(lambda: _auth_paused(stack, "primary"))
            await move(stack.redis, [0, 1, 2, 3], "standby")
            for op in ops:
                await stack.wait_state(op, {State.ACCEPTED})
        for op in ops:
            assert await emails(urls, op) == {"primary": 0, "standby": 1}
            operation = await load_operation(stack.redis, op)
            assert operation is not None and operation.provider == "standby"
            attempts = await load_attempts(stack.redis, op)
            # Any attempt at primary was refused by it (401), never an email.
            assert all(a.outcome == "auth" for a in attempts if a.provider == "primary")


async def _auth_paused(stack: Stack, provider: str) -> bool:
    return provider in (await control.read(stack.redis)).auth_paused


async def test_a_replay_decided_at_the_old_provider_is_sent_there_after_a_switch(
    stack: Stack,
) -> None:
    # The attempt at primary lost its holder (ambiguous); the partitions then moved to standby.
    # Primary's lookup finds nothing, so the replay is decided there: it must go through
    # primary (which was looked up and holds the key), never through standby.
    op = await stack.admit("replayed")
    common: dict[str, Any] = dict(
        max_attempts=6, consumer="t", entry_id="", retention_ms=60_000, provider="primary"
    )
    started = clock.now_ms() - 30_000  # older than the lookup's settle time: trusted
    await BeginAttempt(operation_id=op, attempt_id="a1", now=started, lease_ms=1, **common).run(
        stack.redis
    )
    took = await BeginAttempt(
        operation_id=op, attempt_id="a2", now=started + 10, lease_ms=1, **common
    ).run(stack.redis)
    assert took.code is BeginCode.AMBIGUOUS
    await move(stack.redis, [0, 1, 2, 3], "standby")
    assert await stack.reconcile(op, provider_name="primary") == "replay"
    async with run_sandbox(delivered_delay_seconds=0.2) as standby_url:
        urls = {"primary": stack.provider_url, "standby": standby_url}
        async with stack.sender(named=named_env(urls)):
            await stack.wait_state(op, {State.ACCEPTED})
        assert await emails(urls, op) == {"primary": 1, "standby": 0}
    attempts = await load_attempts(stack.redis, op)
    assert [a.provider for a in attempts] == ["primary", "primary"]
    operation = await load_operation(stack.redis, op)
    assert operation is not None and operation.provider == "primary" and not operation.pinned


async def test_an_operation_deferred_by_429s_at_the_old_provider_is_sent_once_by_the_new(
    stack: Stack,
) -> None:
    # Primary lets one send a second through and answers the rest 429 with a Retry-After:
    # the deferred operations are retried after the switch, at standby, each exactly once.
    await configure(stack.provider_url, send_rate_per_second=1.0, send_burst=1)
    async with run_sandbox(delivered_delay_seconds=0.2) as standby_url:
        urls = {"primary": stack.provider_url, "standby": standby_url}
        async with stack.sender(named=named_env(urls)):
            ops = [await stack.admit(f"pressed-{i}") for i in range(16)]
            await wait_for(lambda: _throttled_at(stack, ops, "primary"))
            await move(stack.redis, [0, 1, 2, 3], "standby")
            for op in ops:
                await stack.wait_state(op, {State.ACCEPTED})
        handed_over = 0
        for op in ops:
            operation = await load_operation(stack.redis, op)
            assert operation is not None
            counts = await emails(urls, op)
            assert sum(counts.values()) == 1 and counts[operation.provider] == 1, (op, counts)
            attempts = await load_attempts(stack.redis, op)
            at_primary = [a for a in attempts if a.provider == "primary"]
            if operation.provider == "standby" and at_primary:
                handed_over += 1
                assert all(a.outcome == "throttled" for a in at_primary), attempts
        assert handed_over, "no operation was deferred at primary and sent by standby"


async def _throttled_at(stack: Stack, ops: list[str], provider: str) -> bool:
    for op in ops:
        for attempt in await load_attempts(stack.redis, op):
            if attempt.provider == provider and attempt.outcome == "throttled":
                return True
    return False

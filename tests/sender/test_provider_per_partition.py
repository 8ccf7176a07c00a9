"""Each partition sends through its own provider (two real sandboxes), every attempt names
the provider it went to, and a switch mid-run sends nothing twice."""

from __future__ import annotations

from prometheus_client import REGISTRY
from redis.asyncio import Redis

from shared import control, switch
from shared.model import State
from shared.operations import load_attempts, load_operation
from tests.sender.conftest import Stack
from tests.support.sandbox import SANDBOX_API_KEY, run_sandbox, sent_emails

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

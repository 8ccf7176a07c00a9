"""The progressive switch (shared/progressive.py) between two real sandboxes, driven by the
sender's own loop (services/sender/failover.py): it widens while the new provider holds,
rolls its partitions back when it does not, stops where a person says, and sends every
operation exactly once across both providers whatever it does."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any
from unittest import mock

import aiohttp
import pytest
from redis.asyncio import Redis

from services.sender import app
from services.sender.worker import Sender
from shared import actions, control, progressive
from shared.keys import AUDIT
from shared.model import State
from shared.operations import load_attempts
from shared.progressive import Phase, Plan
from tests.sender.conftest import Stack, configured_providers, wait_for
from tests.sender.test_provider_per_partition import NAMES, emails, named_env
from tests.support.sandbox import run_sandbox

pytestmark = pytest.mark.cluster_pass  # also on a Redis Cluster: make test-cluster

PARTITIONS = list(range(4))


@contextlib.asynccontextmanager
async def driving(
    stack: Stack, sender: Sender | None, named: dict[str, str], **overrides: Any
) -> AsyncIterator[None]:
    """The sender's progressive-switch loop (with RESETGATE_FAILOVER_* from ``named``), as
    the sender's wiring builds it; ``sender`` None: a driver with no sender beside it."""
    settings = stack.settings(**overrides)
    async with aiohttp.ClientSession() as session, contextlib.AsyncExitStack() as adapters:
        configured = configured_providers(settings, named)
        if sender is None:
            opened = await app.open_all(adapters, session, configured)
            providers = {o.config.name: o.provider for o in opened}
        else:
            providers = {name: r.provider for name, r in sender.runners.items()}
        checked = [(n, providers[n.name]) for n in configured]
        with mock.patch.dict(os.environ, named):
            loop = app.failover_loop(settings, stack.redis, session, checked)
        stop = asyncio.Event()
        task = asyncio.create_task(loop(stop))
        try:
            yield
        finally:
            stop.set()
            await asyncio.wait_for(task, timeout=10)


async def ask(redis: Redis, to: str = "standby", window: float = 1.0, **limits: Any) -> Plan:
    values: dict[str, Any] = {
        "first": 1,
        "growth": 2.0,
        "window_ms": int(window * 1000),
        "max_throttled_share": 0.5,
        "abort_age_ms": 0,
        "settle_ms": 30_000,
        **limits,
    }
    plan = progressive.plan_for(
        await control.read(redis),
        to,
        PARTITIONS,
        NAMES,
        progressive.Limits(**values),
        "cli:test",
        "test",
    )
    assert await actions.progressive_switch(redis, plan) == ""
    return plan


async def phase_in(redis: Redis, phases: set[Phase]) -> Plan | None:
    plan = await progressive.read(redis)
    return plan if plan is not None and plan.phase in phases else None


async def sent_once(stack: Stack, urls: dict[str, str], ops: list[str]) -> dict[str, int]:
    """Every operation accepted and emailed exactly once, by its owner; emails per provider."""
    used = dict.fromkeys(NAMES, 0)
    for op in ops:
        operation = await stack.wait_state(op, {State.ACCEPTED}, timeout=60)
        counts = await emails(urls, op)
        assert sum(counts.values()) == 1 and counts[operation.provider] == 1, (op, counts)
        used[operation.provider] += 1
    return used


async def test_a_switch_to_a_standby_refusing_every_send_rolls_its_first_partition_back(
    stack: Stack,
) -> None:
    # The standby answers 401 to every call (a revoked key): its first partition's sends are
    # refused (never an email), the standby pauses, and the switch rolls that partition back
    # without moving another; the primary then sends its operations, each once.
    async with run_sandbox(delivered_delay_seconds=0.2, revoked_status=401) as standby_url:
        urls = {"primary": stack.provider_url, "standby": standby_url}
        named = named_env(urls)
        ops = [await stack.admit(f"refused-{i}") for i in range(16)]
        plan = await ask(stack.redis, window=60.0)
        first = plan.order[0]
        async with driving(stack, None, named):
            watching = await wait_for(lambda: phase_in(stack.redis, {Phase.WATCHING}), 30)
            assert watching.moved == [first]
            async with stack.sender(named=named):
                ended = await wait_for(lambda: phase_in(stack.redis, {Phase.ROLLED_BACK}), 60)
                used = await sent_once(stack, urls, ops)
        assert ended.moved == [first] and ended.step == 0, ended.log
        assert "rolling back: standby is paused (credentials)" in "\n".join(ended.log)
        assert used == {"primary": len(ops), "standby": 0}
        state = await control.read(stack.redis)
        assert {state.provider_for(p, "primary") for p in PARTITIONS} == {"primary"}
        assert not state.paused and state.switch is None
        # The first partition's work went to the standby and was refused there, never sent.
        tried = {
            op: [a.outcome for a in await load_attempts(stack.redis, op) if a.provider == "standby"]
            for op in ops
        }
        tried = {op: outcomes for op, outcomes in tried.items() if outcomes}
        assert tried and {o for outcomes in tried.values() for o in outcomes} == {"auth"}
        assert {int(op.split("-")[1]) for op in tried} == {first}, tried
        trail = [
            f["reason"]
            for _, f in await stack.redis.xrange(AUDIT)
            if f["action"] == "progressive-switch"
        ]
        assert any("rolled back" in line for line in trail), trail


async def test_a_progressive_switch_to_a_healthy_standby_widens_to_every_partition(
    stack: Stack,
) -> None:
    async with run_sandbox(delivered_delay_seconds=0.2) as standby_url:
        urls = {"primary": stack.provider_url, "standby": standby_url}
        named = named_env(urls)
        async with stack.sender(named=named) as sender, driving(stack, sender, named):
            ops = [await stack.admit(f"wide-{i}") for i in range(12)]
            await ask(stack.redis, window=0.5)
            for i in range(12):  # admitted while it widens
                ops.append(await stack.admit(f"during-{i}"))
                await asyncio.sleep(0.1)
            done = await wait_for(lambda: phase_in(stack.redis, {Phase.DONE}), 60)
            ops += [await stack.admit(f"after-{i}") for i in range(8)]
            used = await sent_once(stack, urls, ops)
        assert sorted(done.moved) == PARTITIONS and done.step == 2, done.log
        steps = [line for line in done.log if "send through standby; watching" in line]
        assert len(steps) == 3, done.log  # 1, then 2, then the last 1
        state = await control.read(stack.redis)
        assert {state.provider_for(p, "primary") for p in PARTITIONS} == {"standby"}
        assert used["standby"] >= 8, used  # at least those admitted after it ended


async def test_a_person_stops_it_where_it_is_or_rolls_it_back(stack: Stack) -> None:
    async with run_sandbox(delivered_delay_seconds=0.2) as standby_url:
        named = named_env({"primary": stack.provider_url, "standby": standby_url})
        async with driving(stack, None, named):
            plan = await ask(stack.redis, window=120.0)
            await wait_for(lambda: phase_in(stack.redis, {Phase.WATCHING}), 30)
            # A manual switch waits for it: the driver owns the partitions it moves.
            refused = await actions.provider_switch(stack.redis, {3: "standby"}, NAMES, 5, "t")
            assert not refused.done and "progressive switch" in refused.message
            assert await actions.progressive_switch(stack.redis, plan) != ""  # one at a time
            await actions.progressive_stop(stack.redis, "cli:alice", rollback=False)
            stopped = await wait_for(lambda: phase_in(stack.redis, {Phase.STOPPED}), 30)
            state = await control.read(stack.redis)
            assert stopped.moved == [plan.order[0]]
            assert state.provider_for(plan.order[0], "primary") == "standby"
            assert {state.provider_for(p, "primary") for p in plan.order[1:]} == {"primary"}
            # Stopped, it is history: a new one may start, and a person may roll it back.
            await ask(stack.redis, window=120.0)
            await wait_for(lambda: phase_in(stack.redis, {Phase.WATCHING}), 30)
            await actions.progressive_stop(stack.redis, "cli:alice", rollback=True)
            rolled = await wait_for(lambda: phase_in(stack.redis, {Phase.ROLLED_BACK}), 30)
        assert "stopped by cli:alice" in "\n".join(rolled.log)
        state = await control.read(stack.redis)
        assert rolled.moved and plan.order[0] not in rolled.order
        assert {state.provider_for(p, "primary") for p in rolled.moved} == {"primary"}
        assert state.provider_for(plan.order[0], "primary") == "standby"  # the stopped one's
        assert not state.paused and state.switch is None


async def test_a_driver_that_dies_is_replaced_by_the_next_lease_holder(stack: Stack) -> None:
    from shared.progressive_run import Driver

    first = Driver(stack.redis, NAMES, 4, "sender-a")
    second = Driver(stack.redis, NAMES, 4, "sender-b")
    await ask(stack.redis, window=0.2)
    assert (await first.tick()) is not None and first.holding
    assert await second.tick() is None and not second.holding  # one driver at a time
    await first.tick()
    assert (await progressive.read(stack.redis)).moved  # type: ignore[union-attr]
    await first.release()  # as if it died: its lease ends
    done = await wait_for(lambda: _ticked_to_done(second), 30)
    assert sorted(done.moved) == PARTITIONS


async def _ticked_to_done(driver: Any) -> Plan | None:
    plan = await driver.tick()
    await asyncio.sleep(0.05)
    return plan if plan is not None and plan.phase is Phase.DONE else None

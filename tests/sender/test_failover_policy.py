"""The preapproved failover (services/sender/failover.py), both sides of each rule: it
starts for a primary that refuses us or accepts nothing for long, and not for a short
burst of 429s, a refusal about players, a standby that fails its checks, or without the
opt-in; and what it moves is sent exactly once."""

from __future__ import annotations

from typing import Any

from prometheus_client import REGISTRY

from shared import control, progressive
from shared.keys import PROVIDER_CHECKS
from shared.model import State
from shared.progressive import Phase
from tests.sender.conftest import Stack, wait_for
from tests.sender.test_progressive_switch import PARTITIONS, driving, phase_in, sent_once
from tests.sender.test_provider_per_partition import named_env
from tests.support.sandbox import configure, run_sandbox

FAST = {"progressive_window_seconds": 3.0}


def policy_env(urls: dict[str, str], on: bool = True) -> dict[str, str]:
    return named_env(urls) | ({"RESETGATE_FAILOVER_PRIMARY": "standby"} if on else {})


def paged(reason: str) -> float | None:
    labels = {"provider": "primary", "standby": "standby", "reason": reason}
    return REGISTRY.get_sample_value("resetgate_failover_partitions", labels)


async def test_a_primary_whose_key_is_rejected_fails_over_and_pages(stack: Stack) -> None:
    await configure(stack.provider_url, revoked_status=401)
    async with run_sandbox(delivered_delay_seconds=0.2) as standby_url:
        urls = {"primary": stack.provider_url, "standby": standby_url}
        named = policy_env(urls)
        async with stack.sender(named=named) as sender, driving(stack, sender, named, **FAST):
            ops = [await stack.admit(f"revoked-{i}") for i in range(12)]
            done = await wait_for(lambda: phase_in(stack.redis, {Phase.DONE}), 60)
            used = await sent_once(stack, urls, ops)
            assert paged("paused:credentials") == len(PARTITIONS)
        assert used == {"primary": 0, "standby": len(ops)}
        assert done.policy == "paused:credentials" and done.actor.startswith("failover-policy:")
        assert sorted(done.moved) == PARTITIONS
        state = await control.read(stack.redis)
        assert {state.provider_for(p, "primary") for p in PARTITIONS} == {"standby"}


async def test_without_the_policy_nothing_moves(stack: Stack) -> None:
    await configure(stack.provider_url, revoked_status=401)
    async with run_sandbox(delivered_delay_seconds=0.2) as standby_url:
        urls = {"primary": stack.provider_url, "standby": standby_url}
        named = policy_env(urls, on=False)
        async with stack.sender(named=named) as sender, driving(stack, sender, named, **FAST):
            op = await stack.admit("revoked-alone")
            await wait_for(lambda: _paused(stack, "primary"))
            # The driver runs (it holds the lease) and has seen the pause: still nothing moves.
            await wait_for(lambda: progressive.driver(stack.redis))
            await wait_for(lambda: _paused(stack, "primary"))
        assert await progressive.read(stack.redis) is None
        assert (await control.read(stack.redis)).providers == {}
        assert (await stack.wait_state(op, {State.QUEUED, State.DEFERRED})) is not None


async def test_a_primary_that_accepts_nothing_for_long_fails_over(stack: Stack) -> None:
    # 429 with no stated wait to every send, for longer than RESETGATE_FAILOVER_AFTER_SECONDS.
    await configure(stack.provider_url, send_blackout_seconds=600, retry_after_form="absent")
    async with run_sandbox(delivered_delay_seconds=0.2) as standby_url:
        urls = {"primary": stack.provider_url, "standby": standby_url}
        named = policy_env(urls)
        settings: dict[str, Any] = {**FAST, "failover_after_seconds": 2}
        async with stack.sender(named=named) as sender, driving(stack, sender, named, **settings):
            ops = [await stack.admit(f"stalled-{i}") for i in range(12)]
            done = await wait_for(lambda: phase_in(stack.redis, {Phase.DONE}), 90)
            used = await sent_once(stack, urls, ops)
        assert done.policy == "stalled" and "accepted nothing for partition" in done.reason
        assert used == {"primary": 0, "standby": len(ops)}


async def test_a_short_burst_of_429s_does_not_fail_over(stack: Stack) -> None:
    # The same 429s, for far less than RESETGATE_FAILOVER_AFTER_SECONDS: the primary sends
    # everything once they end, and nothing moves.
    await configure(stack.provider_url, send_blackout_seconds=2, retry_after_form="absent")
    async with run_sandbox(delivered_delay_seconds=0.2) as standby_url:
        urls = {"primary": stack.provider_url, "standby": standby_url}
        named = policy_env(urls)
        settings: dict[str, Any] = {**FAST, "failover_after_seconds": 30}
        async with stack.sender(named=named) as sender, driving(stack, sender, named, **settings):
            ops = [await stack.admit(f"burst-{i}") for i in range(12)]
            used = await sent_once(stack, urls, ops)
            await wait_for(lambda: progressive.driver(stack.redis))
        assert used == {"primary": len(ops), "standby": 0}
        assert await progressive.read(stack.redis) is None


async def test_refusals_about_players_do_not_fail_over(stack: Stack) -> None:
    # The primary refuses every recipient of one domain, as documented for a recipient: those
    # resets fail, nothing pauses, and the policy has no reason to move anything.
    await configure(stack.provider_url, reject_domain="gone.example")
    async with run_sandbox(delivered_delay_seconds=0.2) as standby_url:
        urls = {"primary": stack.provider_url, "standby": standby_url}
        named = policy_env(urls)
        settings: dict[str, Any] = {**FAST, "failover_after_seconds": 2}
        async with stack.sender(named=named) as sender, driving(stack, sender, named, **settings):
            refused = [await stack.admit(f"gone-{i}", domain="gone.example") for i in range(8)]
            for op in refused:
                await stack.wait_state(op, {State.FAILED}, timeout=60)
            ops = [await stack.admit(f"fine-{i}") for i in range(4)]
            used = await sent_once(stack, urls, ops)
            await wait_for(lambda: progressive.driver(stack.redis))
        assert not (await control.read(stack.redis)).auth_paused
        assert used == {"primary": len(ops), "standby": 0}
        assert await progressive.read(stack.redis) is None


async def test_a_standby_that_fails_its_checks_is_not_failed_over_to(stack: Stack) -> None:
    await configure(stack.provider_url, revoked_status=401)
    async with run_sandbox(delivered_delay_seconds=0.2, revoked_status=401) as standby_url:
        urls = {"primary": stack.provider_url, "standby": standby_url}
        named = policy_env(urls)
        async with stack.sender(named=named) as sender, driving(stack, sender, named, **FAST):
            await stack.admit("nowhere")
            await wait_for(lambda: _paused(stack, "primary"))
            # The policy ran the standby's preflight (stored for on-call) and it failed.
            await wait_for(lambda: stack.redis.hexists(PROVIDER_CHECKS, "standby"), 30)
        assert await progressive.read(stack.redis) is None
        assert (await control.read(stack.redis)).providers == {}


async def _paused(stack: Stack, provider: str) -> bool:
    return provider in (await control.read(stack.redis)).auth_paused

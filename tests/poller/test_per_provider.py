"""Several providers: each ambiguous attempt is settled by the provider that holds it, and
each provider's delivery events are read from its own feed with its own cursor.

Two real sandboxes (primary, standby), the sender and the poller in this event loop, both
configured with RESETGATE_PROVIDERS. Both sandboxes accept every send and then drop the
connection (docs/provider-contract.md: the send is accepted, the answer lost), so every
operation is ambiguous at the provider its partition sends through.
"""

from __future__ import annotations

from shared.keys import poller_cursor
from shared.model import Delivery, State
from shared.operations import load_attempts, load_operation
from tests.poller.conftest import running_poller, sample
from tests.poller.test_observation_feed import delivery_of
from tests.sender.conftest import Stack, wait_for
from tests.sender.test_provider_per_partition import NAMES, move, named_env
from tests.support.sandbox import configure, run_sandbox, sent_emails


async def test_each_ambiguous_attempt_is_settled_by_its_owner_and_each_feed_is_read(
    stack: Stack,
) -> None:
    async with run_sandbox(delivered_delay_seconds=0.1, drop_every=1) as standby_url:
        urls = {"primary": stack.provider_url, "standby": standby_url}
        env = named_env(urls)
        await configure(stack.provider_url, drop_every=1, delivered_delay_seconds=0.1)
        await move(stack.redis, [0, 1], "standby")
        ops = [await stack.admit(f"acct-lane-{i}") for i in range(12)]
        before = {
            n: sample("resetgate_reconciliations_total", provider=n, outcome="accepted")
            for n in NAMES
        }
        async with stack.sender(named=env):
            for op in ops:
                await stack.wait_state(op, {State.AMBIGUOUS})
        owners = {op: (await load_operation(stack.redis, op)).provider for op in ops}  # type: ignore[union-attr]
        assert set(owners.values()) == set(NAMES), owners  # both providers hold some
        for url in urls.values():
            await configure(url, drop_every=0)
        async with running_poller(stack, env):
            for op in ops:
                await delivery_of(stack, op, {Delivery.DELIVERED})
        for op in ops:
            operation = await load_operation(stack.redis, op)
            assert operation is not None and operation.state == State.ACCEPTED
            assert operation.provider == owners[op]  # accepted where it was held
            counts = {n: len(await sent_emails(u, operation_id=op)) for n, u in urls.items()}
            assert counts == {n: int(n == owners[op]) for n in NAMES}, (op, counts)
            ledger = await load_attempts(stack.redis, op)
            assert [(a.provider, a.outcome, a.reconciled) for a in ledger] == [
                (owners[op], "ambiguous", "accepted")
            ]
        for name in NAMES:
            held = sum(1 for owner in owners.values() if owner == name)
            settled = sample("resetgate_reconciliations_total", provider=name, outcome="accepted")
            assert settled - before[name] == held
            assert await stack.redis.get(poller_cursor(name)), f"{name}'s feed was never read"


async def test_an_attempt_held_by_an_unconfigured_provider_waits(stack: Stack) -> None:
    await configure(stack.provider_url, drop_every=1)
    async with run_sandbox(drop_every=1) as standby_url:
        env = named_env({"primary": stack.provider_url, "standby": standby_url})
        await move(stack.redis, [0, 1, 2, 3], "standby")
        op = await stack.admit("acct-orphaned")
        async with stack.sender(named=env):
            await stack.wait_state(op, {State.AMBIGUOUS})
    # The standby is gone from the poller's configuration: nobody may settle its attempt.
    only_primary = named_env({"primary": stack.provider_url}) | {"RESETGATE_PROVIDERS": "primary"}
    async with running_poller(stack, only_primary) as poller:
        reconciler = poller.polled[0].reconciler
        await wait_for(lambda: _seen(reconciler.unknown, op))  # looked at, and left alone
    operation = await load_operation(stack.redis, op)
    assert operation is not None and operation.state == State.AMBIGUOUS
    assert await sent_emails(stack.provider_url, operation_id=op) == []


async def _seen(unknown: set[str], op: str) -> bool:
    return op in unknown

"""Contact forms: every operation state routes to the right queue and priority, converges on
the account's operation through the admission logic (invariant 1) and never adds a send job
while an operation is live."""

from __future__ import annotations

import pytest

from shared.admit import Admitter
from shared.keys import PartitionKeys, partition_of
from shared.model import State
from shared.tokens import parse_keys
from tests.conftest import TEST_TOKEN_KEYS
from tests.poller.conftest import sample
from tests.router.conftest import Desk, router_settings, wait_for
from tests.support.keys import ANY_PARTITION

# The operation's state -> (priority, attached) the case must carry.
EXPECTED = {
    State.QUEUED: ("normal", "true"),
    State.ATTEMPTING: ("normal", "true"),
    State.DEFERRED: ("normal", "true"),
    State.AMBIGUOUS: ("normal", "true"),
    State.QUARANTINED: ("normal", "true"),
    State.REVIEW: ("high", "false"),
    State.ACCEPTED: ("normal", "false"),
    State.FAILED: ("high", "false"),
    State.EXHAUSTED: ("high", "false"),
    State.EXPIRED: ("high", "false"),
}


async def operation_in(desk: Desk, account_id: str, state: State) -> str:
    """An operation admitted the ordinary way, then put in ``state``."""
    settings = router_settings(desk.redis_url)
    admission = await Admitter(desk.redis, settings, parse_keys(TEST_TOKEN_KEYS)).admit(
        account_id, "public"
    )
    op = admission.operation_id
    await desk.redis.hset(PartitionKeys.of(op).operation(op), "state", str(state))
    return op


async def send_jobs(desk: Desk) -> int:
    return sum([await desk.redis.xlen(PartitionKeys(p).send) for p in range(4)])


@pytest.mark.parametrize("state", list(EXPECTED))
async def test_invariant_1_contact_form_converges_in_every_state(desk: Desk, state: State) -> None:
    login = await desk.account("acct-1")
    op = await operation_in(desk, "acct-1", state)
    jobs = await send_jobs(desk)
    before = sample(
        "resetgate_support_cases_total", queue="account-recovery", priority=EXPECTED[state][0]
    )
    await desk.submit(event_id="evt-state", login=login, topic="password_reset")
    async with desk.router():
        (case,) = await desk.wait_cases(1)
    priority, attached = EXPECTED[state]
    assert case["queue"] == "account-recovery"
    assert (case["priority"], case["attached"]) == (priority, attached)
    assert (case["operation_id"], case["state"]) == (op, str(state))
    assert case["admission"] in ("converged", "cooldown")
    assert case["case_id"].startswith("case-") and case["event_id"] == "evt-state"
    assert await send_jobs(desk) == jobs, "the router never adds a send job by itself"
    raw = await desk.redis.hgetall(PartitionKeys.of(op).operation(op))
    assert raw["ep:contact_form"] == "1" and raw["last_actor"] == "contact-form:evt-state"
    assert (
        sample("resetgate_support_cases_total", queue="account-recovery", priority=priority)
        == before + 1
    )


async def test_no_operation_yet_admission_creates_exactly_one(desk: Desk) -> None:
    login = await desk.account("acct-new")
    await desk.submit(login=login)
    async with desk.router():
        (case,) = await desk.wait_cases(1)
    assert (case["admission"], case["state"], case["attached"]) == ("created", "queued", "true")
    pk = PartitionKeys(partition_of("acct-new", 4))
    assert await desk.redis.hget(pk.account("acct-new"), "last") == case["operation_id"]
    assert await send_jobs(desk) == 1


async def test_failed_operation_after_its_cooldown_gets_a_new_one(desk: Desk) -> None:
    await desk.account("acct-again")
    old = await operation_in(desk, "acct-again", State.FAILED)
    pk = PartitionKeys.of(old)
    await desk.redis.hset(pk.account("acct-again"), "cooldown_until", 0)
    jobs = await send_jobs(desk)
    await desk.submit(account_id="acct-again", topic="login_problem")
    async with desk.router():
        (case,) = await desk.wait_cases(1)
    assert case["admission"] == "created" and case["operation_id"] != old
    assert await send_jobs(desk) == jobs + 1


async def test_unknown_login_gets_a_case_without_an_operation(desk: Desk) -> None:
    await desk.submit(login="nobody@example.com", topic="hacked_account")
    async with desk.router():
        (case,) = await desk.wait_cases(1)
    assert (case["queue"], case["priority"]) == ("account-recovery", "normal")
    assert (case["operation_id"], case["identity"], case["account_id"]) == ("", "unknown", "")
    assert "nobody" not in str(case)
    assert await send_jobs(desk) == 0
    assert not await desk.redis.keys(ANY_PARTITION.operation("*"))


async def test_other_topics_go_to_the_general_queue_without_admission(desk: Desk) -> None:
    login = await desk.account("acct-billing")
    op = await operation_in(desk, "acct-billing", State.QUEUED)
    await desk.submit(login=login, topic="billing")
    async with desk.router():
        (case,) = await desk.wait_cases(1)
    assert (case["queue"], case["priority"], case["operation_id"]) == ("general", "normal", "")
    raw = await desk.redis.hgetall(PartitionKeys.of(op).operation(op))
    assert "ep:contact_form" not in raw


async def test_topics_are_configurable(desk: Desk) -> None:
    login = await desk.account("acct-topic")
    await desk.submit(login=login, topic="password_reset")
    async with desk.router(account_topics="locked_out"):
        (case,) = await desk.wait_cases(1)
        assert case["queue"] == "general"
        await desk.submit(login=login, topic="locked_out")
        await desk.wait_cases(2)
    assert (await desk.cases())[1]["queue"] == "account-recovery"
    assert await wait_for(desk.settled)

"""Invariant 10 across a Redis outage: every service (admission, two senders, poller,
router) rides out a Redis restart - and a Redis crash - as the same process.

While Redis is away each service stays alive (/healthz 200, same pid), says it is not ready
(/readyz 503), admission acknowledges nothing (503, never a 202 it cannot keep), and the
loops back off instead of spinning. Once Redis is back every service is ready again without
a restart, the operations admitted before the outage - still queued behind the senders'
pacing when Redis went away - are all sent, once each, and new admissions, contact forms
and delivery observation work as before.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from shared.keys import CONTACT_FORMS, PartitionKeys
from tests.chaos.audit import cases_by_event
from tests.chaos.stack import INTERNAL_TOKEN, SERVICES, Stack, account_id, login, running_stack
from tests.support.sandbox import sandbox_stats

BEFORE = 24  # operations admitted just before the outage
OUTAGE_SECONDS = 5.0
# A paced sender (4 sends/s shared by both) still has most of BEFORE waiting for a slot
# when Redis goes away: the path where a store error used to kill the sender's workers.
PACED = {"sender": {"RESETGATE_PROVIDER_MAX_RATE": "4", "RESETGATE_PROVIDER_BURST": "1"}}
# Loop errors a service may log during the outage. Each loop backs off (0.1 s doubling to
# 5 s): about 6 lines per loop for a 5 s outage. A loop retrying without backoff would
# log hundreds.
MAX_ERRORS_PER_LOOP = 20
# Each outage test admits from a block of accounts of its own on the module's one stack.
BLOCK = BEFORE + 10
OUTAGES = {"restart": 0, "crash": 1}  # the block each kind of outage uses


@pytest.fixture(scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    """One stack for the module (seven processes started once, not three times): the
    outages take Redis away and bring it back, and the last test empties it."""
    logs = tmp_path_factory.mktemp("outage")
    async with running_stack(logs, accounts=BLOCK * len(OUTAGES), faults=False, env=PACED) as s:
        yield s


async def get(session: aiohttp.ClientSession, url: str) -> int:
    try:
        async with session.get(url) as response:
            return response.status
    except (aiohttp.ClientError, TimeoutError):
        return 0


async def until_status(stack: Stack, path: str, status: int, timeout: float) -> dict[str, bool]:
    """Poll every service's ``path`` until each has answered ``status`` once."""
    seen = dict.fromkeys(SERVICES, False)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=3)) as session:
        deadline = time.monotonic() + timeout
        while not all(seen.values()) and time.monotonic() < deadline:
            for name in SERVICES:
                if not seen[name]:
                    seen[name] = await get(session, stack[name].ops_url + path) == status
            await asyncio.sleep(0.1)
    return seen


async def internal(stack: Stack, account: str) -> tuple[int, dict[str, Any]]:
    url = stack.admission_url + "/internal/v1/recovery-operations"
    body = {"account_id": account, "entry_point": "agent", "actor": "outage-test"}
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
        session.post(url, json=body, headers={"Authorization": f"Bearer {INTERNAL_TOKEN}"}) as r,
    ):
        return r.status, await r.json(content_type=None)


async def public(stack: Stack, index: int) -> int:
    url = stack.admission_url + "/v1/password-resets"
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
        session.post(url, json={"login": login(index)}) as response,
    ):
        return response.status


async def states(stack: Stack, ops: list[str]) -> dict[str, str]:
    async with stack.redis.pipeline(transaction=False) as pipe:
        for op in ops:
            pipe.hget(PartitionKeys.of(op).operation(op), "state")
        return dict(zip(ops, await pipe.execute(), strict=True))


async def until_accepted(stack: Stack, ops: list[str], timeout: float) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while True:
        now = await states(stack, ops)
        if all(s == "accepted" for s in now.values()) or time.monotonic() > deadline:
            return now
        await asyncio.sleep(0.25)


def loop_errors(stack: Stack, name: str) -> Counter[str]:
    return Counter(
        r.get("loop", "?")
        for r in stack[name].log_records()
        if r.get("msg") == "loop error; retrying"
    )


async def admit_before(stack: Stack, first: int) -> list[str]:
    ops = []
    for i in range(first, first + BEFORE):
        status, body = await internal(stack, account_id(i))
        assert status == 201, body
        ops.append(body["operation_id"])
    return ops


async def take_redis_away(stack: Stack, crash: bool) -> None:
    server = stack.redis_server
    await asyncio.to_thread(server.stop, crash)


async def check_outage(stack: Stack, first: int) -> None:
    not_ready = await until_status(stack, "/readyz", 503, timeout=20)
    assert all(not_ready.values()), f"/readyz never said 503 during the outage: {not_ready}"
    alive = await until_status(stack, "/healthz", 200, timeout=10)
    assert all(alive.values()), f"/healthz failed during the outage: {alive}"
    assert await public(stack, 0) == 503, "admission acknowledged what it could not store"
    status, body = await internal(stack, account_id(first + BEFORE + 1))
    assert status == 503 and body["error"] == "store_unavailable", body


@pytest.mark.timeout(240)
@pytest.mark.parametrize("outage", list(OUTAGES))
async def test_invariant_10_every_service_survives_a_redis_outage(
    stack: Stack, outage: str
) -> None:
    first = OUTAGES[outage] * BLOCK
    pids = {name: stack[name].process.pid for name in SERVICES}  # type: ignore[union-attr]
    errors_before = {name: loop_errors(stack, name) for name in SERVICES}
    before = await admit_before(stack, first)
    await stack.redis.xadd(
        CONTACT_FORMS,
        {"event_id": f"{outage}-form-before", "topic": "password_reset", "login": login(first)},
    )
    await take_redis_away(stack, outage == "crash")
    went_away = time.monotonic()
    await check_outage(stack, first)
    await asyncio.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - went_away)))
    await stack.redis_server.start_async()
    back = time.monotonic()

    ready = await until_status(stack, "/readyz", 200, timeout=30)
    recovered = time.monotonic() - back
    assert all(ready.values()), f"not ready again after the outage: {ready}"
    now = {name: stack[name].process.pid for name in SERVICES}  # type: ignore[union-attr]
    exited = [n for n in SERVICES if not stack[n].running]
    assert not exited and now == pids, f"restarted or exited: {exited}\n" + "\n".join(
        stack[n].tail(10) for n in exited
    )

    # Work admitted before the outage finishes after it; new work flows as before.
    status, body = await internal(stack, account_id(first + BEFORE + 2))
    assert status == 201, body
    after = body["operation_id"]
    await stack.redis.xadd(
        CONTACT_FORMS,
        {
            "event_id": f"{outage}-form-after",
            "topic": "password_reset",
            "login": login(first + BEFORE + 3),
        },
    )
    final = await until_accepted(stack, [*before, after], timeout=90)
    assert all(s == "accepted" for s in final.values()), Counter(final.values())
    await _check_after(stack, after, outage)
    worst = {
        name: (loop_errors(stack, name) - errors_before[name]).most_common(1) for name in SERVICES
    }
    print(
        f"outage: redis down {back - went_away:.1f} s, every service ready "
        f"{recovered:.1f} s after it returned; most loop errors per service: {worst}"
    )
    for name in SERVICES:
        assert not worst[name] or worst[name][0][1] <= MAX_ERRORS_PER_LOOP, (name, worst)
        assert "worker crashed" not in stack[name].logs(), stack[name].tail(20)


async def _check_after(stack: Stack, after: str, outage: str) -> None:
    async def observed() -> bool:
        delivery = await stack.redis.hget(PartitionKeys.of(after).operation(after), "delivery")
        cases = await cases_by_event(stack.redis)
        forms = {f"{outage}-form-before", f"{outage}-form-after"}
        return delivery == "delivered" and forms <= set(cases)

    deadline = time.monotonic() + 30
    while not await observed():
        assert time.monotonic() < deadline, "poller or router did not resume after the outage"
        await asyncio.sleep(0.25)
    stats = await sandbox_stats(stack.provider_url)
    assert stats["duplicate_sends_total"] == 0
    assert max(stats["sent_by_operation"].values()) == 1


@pytest.mark.timeout(180)
async def test_services_resume_after_redis_comes_back_without_its_data(stack: Stack) -> None:
    """A Redis that returns empty (no persistence, a failover to an empty replica, a flush):
    the work it held is gone, but new work must flow - the senders' and the router's
    consumer groups are re-created instead of failing with NOGROUP forever. Last in the
    module: it empties the stack's Redis."""
    await stack.redis.flushall()
    await stack.seed_directory(4)
    status, body = await internal(stack, account_id(1))
    assert status == 201, body
    await stack.redis.xadd(
        CONTACT_FORMS, {"event_id": "after-flush", "topic": "password_reset", "login": login(2)}
    )
    final = await until_accepted(stack, [body["operation_id"]], timeout=30)
    assert set(final.values()) == {"accepted"}, final
    deadline = time.monotonic() + 30
    while "after-flush" not in await cases_by_event(stack.redis):
        assert time.monotonic() < deadline, "the router did not route after the flush"
        await asyncio.sleep(0.25)

"""The public endpoint spends at most its share of the provider's daily quota (issue 34,
item 4): services/admission/budget.py.

The attack: with a quota of 20 a day, 22 public requests for known logins paused sending
for every player until the window rolled over. Now the public endpoint creates at most 16
(20 less the 20 % reserved), the rest are counted as ``budget_exhausted`` and shown by the
budget gauges, and agents still create theirs. What the budget could break, tested too: no
quota means no budget; resend clicks and unknown logins spend nothing; agents are never
refused; and a refused request answers exactly as an admitted one.
"""

from __future__ import annotations

import asyncio
from typing import Any

from prometheus_client import REGISTRY
from redis.asyncio import Redis

from services.admission.budget import public_limit
from services.admission.public import RECEIVED_BODY
from shared.directory import Account
from shared.keys import PUBLIC_BUDGET, PartitionKeys
from shared.quota import publish, quota_for
from tests.admission.helpers import (
    admission_settings,
    internal_admit,
    public,
    seed_directory,
    serving,
)

QUOTA = 20
DAY_MS = 86_400_000
PUBLIC = public_limit(QUOTA, 0.2)  # 16: the reserve of 4 is rounded up
PARTITIONS = 4


def _accounts(prefix: str, count: int) -> list[tuple[str, Account]]:
    return [
        (f"{prefix}-{i}", Account(f"acct-{prefix}-{i}", f"p{i}@example.com")) for i in range(count)
    ]


async def _created(redis: Redis) -> int:
    return sum([await redis.zcard(PartitionKeys(p).live) for p in range(PARTITIONS)])


def _sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def _with_quota(redis: Redis, redis_server: Any, quota: int | None) -> Any:
    settings = admission_settings(redis_server.url)
    if quota is not None:  # as the senders do at start (services/sender/app.publish_quotas)
        await publish(
            redis, settings.provider_name, quota_for(settings.provider_name, None, quota, DAY_MS)
        )
    return settings


async def test_the_quota_attack_leaves_the_reserve_for_agents_and_shows(
    redis: Redis, redis_server: Any
) -> None:
    victims, agents = _accounts("victim", 22), _accounts("agent", 6)
    await seed_directory(redis, *victims, *agents)
    settings = await _with_quota(redis, redis_server, QUOTA)
    refused_before = _sample(
        "resetgate_admissions_total", entry_point="public", result="budget_exhausted"
    )
    async with serving(settings) as http:
        answers = await asyncio.gather(*(public(http, login) for login, _ in victims))
        assert {(a.status, await a.read()) for a in answers} == {(202, RECEIVED_BODY)}
        assert await _created(redis) == PUBLIC
        refused = (
            _sample("resetgate_admissions_total", entry_point="public", result="budget_exhausted")
            - refused_before
        )
        assert refused == 22 - PUBLIC
        assert _sample("resetgate_public_budget_used") == PUBLIC
        assert _sample("resetgate_public_budget_limit") == PUBLIC
        # The reserve (4), and beyond it: the budget never refuses an agent.
        for _, account in agents:
            answer = await internal_admit(http, account.account_id)
            assert answer.status == 201, await answer.text()
    assert await _created(redis) == PUBLIC + len(agents)


async def test_without_a_quota_there_is_no_budget(redis: Redis, redis_server: Any) -> None:
    players = _accounts("player", 22)
    await seed_directory(redis, *players)
    settings = await _with_quota(redis, redis_server, None)
    async with serving(settings) as http:
        for login, _ in players:
            assert (await public(http, login)).status == 202
    assert await _created(redis) == 22
    assert not await redis.exists(PUBLIC_BUDGET)
    assert _sample("resetgate_public_budget_limit") == 0


async def test_resend_clicks_and_unknown_logins_spend_nothing(
    redis: Redis, redis_server: Any
) -> None:
    clickers, newcomers = _accounts("clicker", PUBLIC // 2), _accounts("new", PUBLIC // 2)
    await seed_directory(redis, *clickers, *newcomers)
    settings = await _with_quota(redis, redis_server, QUOTA)
    async with serving(settings) as http:
        for _ in range(3):  # each clicks three times: one operation each, one share each
            for login, _ in clickers:
                assert (await public(http, login)).status == 202
        for i in range(30):
            assert (await public(http, f"nobody-{i}")).status == 202
        for login, _ in newcomers:  # the rest of the budget is still theirs
            assert (await public(http, login)).status == 202
    assert await _created(redis) == PUBLIC
    assert _sample("resetgate_public_budget_used") == PUBLIC


async def test_a_refused_request_answers_as_an_admitted_one(
    redis: Redis, redis_server: Any
) -> None:
    players = _accounts("late", PUBLIC + 1)
    await seed_directory(redis, *players)
    settings = await _with_quota(redis, redis_server, QUOTA)
    async with serving(settings) as http:
        answers = [await public(http, login) for login, _ in players]
        admitted, refused = answers[0], answers[-1]
        assert await _created(redis) == PUBLIC
        assert (refused.status, await refused.read()) == (admitted.status, await admitted.read())
        assert refused.headers.keys() == admitted.headers.keys()

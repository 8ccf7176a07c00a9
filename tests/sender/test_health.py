"""A provider's health on its own (services/sender/health.py), on a real Redis: every pause
it sets or lifts, its daily quota and its refusals guard, with no attempt around it.

Each protection is tested both ways: the pause that stops sends, and the pause that must
not outlive its cause (a quota window that rolled over, a rotated key) or be set at all (a
recipient's refusal, a refusal counted while already paused)."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from services.sender.guard import RefusalGuard, Refused
from services.sender.health import ProviderHealth
from shared import clock, control, ids
from shared.model import Outcome, State
from shared.providers.base import Refusal, SendResult
from shared.quota import QUOTA_EXCEEDED, DailyQuota
from shared.scripts.attempts import Finalisation
from tests.sender.conftest import wait_for

# Also on a Redis Cluster (make test-cluster): the guard and quota scripts run nowhere else there.
pytestmark = pytest.mark.cluster_pass

NAME = "primary"
KEY = "key-one"
UNDOCUMENTED = SendResult(
    Outcome.PERMANENT, 422, reason="error_code_9001", refusal=Refusal.UNDOCUMENTED
)
WAITS = Finalisation(Outcome.PERMANENT, 422, State.DEFERRED, reason="error_code_9001")


def health(
    redis: Redis, *, key: str = KEY, guard: int = 3, quota: DailyQuota | None = None
) -> ProviderHealth:
    return ProviderHealth(redis, NAME, key, RefusalGuard(guard, window_ms=60_000), quota)


async def note(redis: Redis) -> dict[str, object] | None:
    return (await control.read(redis)).auth_paused.get(NAME)


async def refreshed(redis: Redis, provider: ProviderHealth) -> ProviderHealth:
    await provider.refresh(await control.read(redis))
    return provider


async def test_a_used_up_quota_pauses_the_provider_until_its_window_rolls_over(
    redis: Redis,
) -> None:
    provider = health(redis, quota=DailyQuota(NAME, limit=1, window_ms=2000))
    assert await provider.take_quota() and not provider.paused
    assert await provider.take_quota() is None
    paused = await note(redis)
    assert provider.paused and paused is not None and paused["kind"] == "quota"
    assert int(str(paused["until"])) > clock.now_ms() - 1000

    async def lifted() -> bool:
        return not (await refreshed(redis, provider)).paused

    await wait_for(lifted, timeout=10)  # the window rolled over: nobody had to resume it
    assert await note(redis) is None
    assert await provider.take_quota()


async def test_a_send_given_back_does_not_count_against_the_quota(redis: Redis) -> None:
    provider = health(redis, quota=DailyQuota(NAME, limit=1, window_ms=3_600_000))
    taken = await provider.take_quota()
    assert taken
    await provider.give_back(taken)
    assert await provider.take_quota() and not provider.paused
    await provider.give_back(0)  # none taken: nothing to give back
    assert await provider.take_quota() is None


async def test_no_quota_takes_nothing_and_never_pauses(redis: Redis) -> None:
    provider = health(redis)
    assert [await provider.take_quota() for _ in range(5)] == [0] * 5
    await provider.give_back(0)
    assert not provider.paused and await note(redis) is None


async def test_the_provider_saying_its_quota_is_used_up_pauses_it(redis: Redis) -> None:
    provider = health(redis, quota=DailyQuota(NAME, limit=100, window_ms=3_600_000))
    await provider.answered(SendResult(Outcome.THROTTLED, 429, reason=QUOTA_EXCEEDED), None)
    paused = await note(redis)
    assert provider.paused and paused is not None and paused["kind"] == "quota"
    await provider.answered(SendResult(Outcome.THROTTLED, 429), None)  # a plain 429: no pause
    await control.auth_resume(redis, NAME)
    assert not (await refreshed(redis, provider)).paused


async def test_rejected_credentials_pause_until_another_key_is_deployed(redis: Redis) -> None:
    provider = health(redis)
    await provider.answered(SendResult(Outcome.AUTH, 401, detail="bad key"), None)
    paused = await note(redis)
    assert provider.paused and paused is not None and paused["kind"] == "credentials"
    assert "HTTP 401" in str(paused["reason"])
    assert (await refreshed(redis, provider)).paused  # the same key: it stays paused
    rotated = await refreshed(redis, health(redis, key="key-two"))
    assert not rotated.paused and await note(redis) is None


async def test_an_account_pause_outlives_a_new_key(redis: Redis) -> None:
    provider = health(redis)
    await provider.answered(
        SendResult(Outcome.AUTH, 403, pause="account", detail="domain suspended"), None
    )
    assert (await refreshed(redis, health(redis, key="key-two"))).paused
    paused = await note(redis)
    assert paused is not None and paused["reason"] == "domain suspended"


async def test_another_senders_pause_and_an_operators_resume_reach_this_process(
    redis: Redis,
) -> None:
    provider = await refreshed(redis, health(redis))
    assert not provider.paused
    await control.provider_pause(redis, NAME, control.PauseKind.ACCOUNT, "elsewhere")
    assert (await refreshed(redis, provider)).paused
    await control.auth_resume(redis, NAME)
    assert not (await refreshed(redis, provider)).paused


async def test_undocumented_refusals_of_distinct_operations_trip_the_guard_once(
    redis: Redis,
) -> None:
    provider = health(redis, guard=3)
    now = clock.now_ms()
    ops = [ids.operation_id(i % 2) for i in range(4)]
    trips = [
        provider.judge(UNDOCUMENTED, WAITS, Refused(op, f"acct-{op}", now, f"to-{op}"))
        for op in ops
    ]
    trip = trips[2]
    assert trips[:2] == [None, None] and trip is not None and trips[3] is None
    assert provider.paused  # at once, before any await: no concurrent attempt counts on
    await provider.answered(UNDOCUMENTED, trip)
    paused = await note(redis)
    assert paused is not None and paused["kind"] == "refusals"
    assert paused["held"] == ops[:3]
    assert "error_code_9001" in str(paused["reason"])


async def test_recipient_refusals_and_acceptances_never_trip_the_guard(redis: Redis) -> None:
    provider = health(redis, guard=2)
    now = clock.now_ms()
    recipient = SendResult(Outcome.PERMANENT, 406, reason="inactive_recipient")
    failed = Finalisation(Outcome.PERMANENT, 406, State.FAILED, reason="inactive_recipient")
    for i in range(5):
        refusal = Refused(f"op-{i}", f"a-{i}", now, f"t-{i}")
        assert provider.judge(recipient, failed, refusal) is None
    assert provider.judge(UNDOCUMENTED, WAITS, Refused("op-x", "a-x", now, "t-x")) is None
    accepted = Finalisation(Outcome.ACCEPTED, 200, State.ACCEPTED)
    provider.judge(SendResult(Outcome.ACCEPTED, 200), accepted, Refused("op-y", "a-y", now))
    assert provider.judge(UNDOCUMENTED, WAITS, Refused("op-z", "a-z", now, "t-z")) is None
    assert not provider.paused and await note(redis) is None


async def test_refusals_while_paused_are_not_counted_again(redis: Redis) -> None:
    provider = health(redis, guard=1)
    await control.provider_pause(redis, NAME, control.PauseKind.ACCOUNT, "elsewhere")
    assert (await refreshed(redis, provider)).paused
    assert provider.judge(UNDOCUMENTED, WAITS, Refused("op-1", "a-1", clock.now_ms())) is None
    paused = await note(redis)
    assert paused is not None and paused["kind"] == "account"  # not overwritten

"""The progressive switch from the console: on-call asks for it from the switch form (the
same action as ``resetgate ops provider switch --progressive``), the home page shows its
steps and offers to stop it, and the stop reaches the driver; support cannot do either."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio import Redis

from shared import progressive
from shared.progressive import Phase
from shared.progressive_run import Driver
from tests.console.helpers import console, console_settings, get_text, sign_in
from tests.console.test_console_providers import TWO, _post


@pytest.fixture(autouse=True)
def two_providers(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in TWO.items():
        monkeypatch.setenv(name, value)


async def test_on_call_asks_for_a_progressive_switch_sees_its_steps_and_stops_it(
    redis: Redis, redis_server: Any
) -> None:
    driver = Driver(redis, ["primary", "standby"], 4, "sender-test")
    async with console(console_settings(redis_server.url)) as http:
        headers = await sign_in(http)
        form = await get_text(http, "/console/providers/switch", headers)
        assert 'name="progressive"' in form
        asked = await _post(
            http,
            "/console/providers/switch",
            headers,
            partitions="0-3",
            to="standby",
            progressive="1",
            reason="primary 429s",
        )
        assert asked.status == 303 and "result=progressive" in asked.headers["Location"]
        plan = await progressive.read(redis)
        assert plan is not None and plan.order == [0, 1, 2, 3] and plan.actor.startswith("console:")
        await driver.tick()  # a sender's driver takes it: the first step
        live = await get_text(http, "/console/overview/live", headers)
        assert "progressive switch primary -&gt; standby" in live
        assert "step 1: moving partitions 0 to standby" in live
        assert 'href="/console/providers/progressive/stop?rollback=1"' in live
        stopped = await _post(http, "/console/providers/progressive/stop", headers, rollback="1")
        assert stopped.status == 303
        for _ in range(20):  # the driver sees the stop on its next ticks and rolls back
            if (plan := await driver.tick()) is not None and plan.ended:
                break
        assert plan is not None and plan.phase is Phase.ROLLED_BACK, plan
        again = await get_text(http, "/console/overview/live", headers)
        assert "stopped by console:" in again and "/console/providers/progressive/stop" not in again


async def test_support_cannot_ask_for_or_stop_a_progressive_switch(
    redis: Redis, redis_server: Any
) -> None:
    async with console(console_settings(redis_server.url, console_token_role="read")) as http:
        headers = await sign_in(http, "sue")
        refused = await http.get("/console/providers/progressive/stop", headers=headers)
        assert refused.status == 403
    assert await progressive.read(redis) is None

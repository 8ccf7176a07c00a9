"""The console with two configured providers (primary, standby): the home page names both
with their lines, counts and lists; a provider pause shows with its reason and an
operation waiting on it says so; on-call resumes, switches and rolls back from the console
through the same actions as ``resetgate ops`` (support is refused); each is in the trail."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio import Redis

from shared import control
from shared.keys import AUDIT
from tests.admission.helpers import seed_directory
from tests.console.helpers import console, console_settings, csrf_from, get_text, sign_in
from tests.console.test_console_http import _admit

TWO = {
    "RESETGATE_PROVIDERS": "primary,standby",
    "RESETGATE_PROVIDER_PRIMARY_KIND": "http",
    "RESETGATE_PROVIDER_PRIMARY_API_KEY": "k1",
    "RESETGATE_PROVIDER_STANDBY_KIND": "postmark",
    "RESETGATE_PROVIDER_STANDBY_API_KEY": "k2",
    "RESETGATE_PROVIDER_STANDBY_URL": "http://127.0.0.1:9",
}


@pytest.fixture(autouse=True)
def two_providers(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in TWO.items():
        monkeypatch.setenv(name, value)


def _line(page: str, name: str) -> str:
    return page.split(f'<tr data-provider="{name}">')[1].split("</tr>")[0]


async def _post(http: Any, path: str, headers: dict[str, str], **form: str) -> Any:
    csrf = await csrf_from(http, path, headers)
    return await http.post(
        path, data={**form, "csrf": csrf}, headers=headers, allow_redirects=False
    )


async def test_home_names_both_providers_and_shows_a_pause_with_its_reason(
    redis: Redis, redis_server: Any
) -> None:
    await seed_directory(redis)
    op = await _admit(redis, redis_server.url, "acct-alice")
    await control.provider_pause(redis, "primary", control.PauseKind.ACCOUNT, "domain suspended")
    async with console(console_settings(redis_server.url)) as http:
        headers = await sign_in(http)
        home = await get_text(http, "/console/", headers)
        live = await get_text(http, "/console/overview/live", headers)
        operation = await get_text(http, f"/console/operations/{op}", headers)
    assert "Is anything wrong?" in home and 'data-live-url="/console/overview/live' in home
    primary, standby = _line(live, "primary"), _line(live, "standby")
    assert "<td>http</td>" in primary and "<td>postmark</td>" in standby
    assert "<td>0, 1, 2, 3</td>" in primary and "<td>none</td>" in standby
    assert "paused: account" in primary and "domain suspended" in primary
    assert 'href="/console/providers/primary/resume"' in primary and "sending" in standby
    assert "not run yet" in primary  # no sender has run the preflight on this stack
    assert '<div class="counter" data-count="live"><dt>Live</dt><dd><strong>1</strong>' in live
    assert "provider <strong>default</strong>" not in live and 'data-provider="default"' not in live
    assert "waiting for provider primary to resume" in operation


async def test_support_cannot_resume_on_call_can_and_the_trail_names_who(
    redis: Redis, redis_server: Any
) -> None:
    await control.provider_pause(redis, "primary", control.PauseKind.REFUSALS, "refused alike")
    async with console(console_settings(redis_server.url, console_token_role="read")) as http:
        headers = await sign_in(http, "sue")
        live = await get_text(http, "/console/overview/live", headers)
        assert "paused: refusals" in live and "/console/providers/primary/resume" not in live
        refused = await http.get("/console/providers/primary/resume", headers=headers)
        assert refused.status == 403
        csrf = await csrf_from(http, "/console/", headers)  # a valid form token, no act role
        posted = await http.post(
            "/console/providers/primary/resume",
            data={"csrf": csrf},
            headers=headers,
            allow_redirects=False,
        )
        assert posted.status == 403
    assert "primary" in (await control.read(redis)).auth_paused
    async with console(console_settings(redis_server.url)) as http:
        headers = await sign_in(http, "ann")
        forged = await http.post(
            "/console/providers/primary/resume",
            data={"csrf": "0" * 64},
            headers=headers,
            allow_redirects=False,
        )
        assert forged.status == 403 and "primary" in (await control.read(redis)).auth_paused
        done = await _post(http, "/console/providers/primary/resume", headers)
        assert done.status == 303 and done.headers["Location"].endswith("provider-resumed")
        assert "primary" not in (await control.read(redis)).auth_paused
        again = await _post(http, "/console/providers/primary/resume", headers)
        assert again.status == 409
        trail = await get_text(http, "/console/audit?provider=primary", headers)
    [entry] = [f for _, f in await redis.xrange(AUDIT) if f["result"].startswith("done")]
    assert entry["actor"] == "console:ann" and entry["action"] == "provider-resume"
    assert "<td>console:ann</td><td>provider-resume</td><td>provider:primary</td>" in trail


async def test_switch_and_rollback_from_the_console_move_partitions_and_are_in_the_trail(
    redis: Redis, redis_server: Any
) -> None:
    async with console(console_settings(redis_server.url)) as http:
        headers = await sign_in(http, "ann")
        bad = await _post(
            http, "/console/providers/switch", headers, partitions="0-9", to="standby", reason="x"
        )
        assert bad.status == 422 and (await control.read(redis)).providers == {}
        done = await _post(
            http,
            "/console/providers/switch",
            headers,
            partitions="0-1",
            to="standby",
            reason="primary degraded",
        )
        assert done.status == 303, await done.text()
        state = await control.read(redis)
        assert state.providers == {0: "standby", 1: "standby"} and not state.paused
        live = await get_text(http, "/console/overview/live", headers)
        assert "<td>0, 1</td>" in _line(live, "standby") and "/console/providers/rollback" in live
        back = await _post(http, "/console/providers/rollback", headers, reason="recovered")
        assert back.status == 303, await back.text()
        assert (await control.read(redis)).providers == {0: "primary", 1: "primary"}
        by_partition = await get_text(http, "/console/audit?partition=1", headers)
        by_other = await get_text(http, "/console/audit?partition=3", headers)
        unknown = await http.get("/console/audit?provider=nobody", headers=headers)
    audit = [f for _, f in await redis.xrange(AUDIT)]
    assert [(a["action"], a["actor"], a["result"]) for a in audit] == [
        ("provider-switch", "console:ann", "done"),
        ("provider-rollback", "console:ann", "done"),
    ]
    assert by_partition.count("<td>console:ann</td>") == 2
    assert "provider-switch" not in by_other and unknown.status == 422

"""What support reads must be what happened, in words a support agent uses: a bounced email
is a bounce (not a green "accepted"), a quarantined operation can be found, a paused
partition's operation says it waits for a resume, an audit entry links to its operation,
and a provider nobody configured is flagged."""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis

from shared import actions, control
from shared.keys import CONTROL, PartitionKeys
from tests.admission.helpers import seed_directory
from tests.console.helpers import console, console_settings, get_text, sign_in
from tests.console.test_console_http import _admit


def _op_key(operation_id: str) -> str:
    return PartitionKeys.of(operation_id).operation(operation_id)


async def test_a_bounced_email_shows_as_a_bounce_on_the_account_and_the_operation(
    redis: Redis, redis_server: Any
) -> None:
    await seed_directory(redis)
    op = await _admit(redis, redis_server.url, "acct-alice")
    await redis.hset(_op_key(op), mapping={"state": "accepted", "delivery": "bounced"})
    async with console(console_settings(redis_server.url)) as http:
        headers = await sign_in(http)
        operation = await get_text(http, f"/console/operations/{op}", headers)
        account = await get_text(http, "/console/accounts/acct-alice", headers)
    for page in (operation, account):
        assert '<span class="state state-bounced">accepted, then bounced</span>' in page
        assert "state-accepted" not in page


async def test_quarantined_operations_are_listed_and_audit_targets_are_links(
    redis: Redis, redis_server: Any
) -> None:
    await seed_directory(redis)
    op = await _admit(redis, redis_server.url, "acct-alice")
    assert (await actions.quarantine(redis, op, "console:ann", "player asked")).done
    async with console(console_settings(redis_server.url)) as http:
        headers = await sign_in(http)
        oldest = await get_text(http, "/console/oldest", headers)
        providers = await get_text(http, "/console/providers", headers)
    quarantined = oldest.split('id="quarantined-h"')[1]
    assert f'<a href="/console/operations/{op}">{op}</a>' in quarantined
    audit = providers.split("<td>console:ann</td>")[1]
    assert f'<a href="/console/operations/{op}">{op}</a>' in audit.split("</tr>")[0]


async def test_a_paused_partitions_operation_waits_for_a_resume_and_says_so(
    redis: Redis, redis_server: Any
) -> None:
    await seed_directory(redis)
    op = await _admit(redis, redis_server.url, "acct-alice")
    partition = PartitionKeys.of(op).partition
    await control.pause_partitions(redis, [partition], "bounce spike")
    async with console(console_settings(redis_server.url)) as http:
        headers = await sign_in(http)
        page = await get_text(http, f"/console/operations/{op}", headers)
    assert (
        f"waits for partition {partition} to be resumed</strong>: it is paused (bounce "
        "spike)" in page
    )
    assert " ago)" not in page.split("Next attempt")[1].split("</dd>")[0]


async def test_a_provider_name_that_is_not_configured_is_flagged(
    redis: Redis, redis_server: Any
) -> None:
    await seed_directory(redis)
    op = await _admit(redis, redis_server.url, "acct-alice")
    partition = PartitionKeys.of(op).partition
    await redis.hset(_op_key(op), "provider", "primary")
    await redis.hset(CONTROL, f"provider:{partition}", "primary")
    async with console(console_settings(redis_server.url)) as http:
        headers = await sign_in(http)
        operation = await get_text(http, f"/console/operations/{op}", headers)
        providers = await get_text(http, "/console/providers", headers)
    assert "primary (not configured: nothing sends through it)" in operation
    row = providers.split(f"<tr><td>{partition}</td>")[1].split("</tr>")[0]
    assert "primary (not configured: nothing sends through it)" in row, row

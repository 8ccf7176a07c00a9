"""Issue 15 item 9: the minimal local reset page (``RESETGATE_LOCAL_RESET_PAGE``) consumes the
token once; it is not served unless turned on (production never serves it)."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from shared.keys import PartitionKeys
from shared.operation_views import operation_partition
from tests.admission.helpers import ALICE, admission_settings, seed_directory, serving
from tests.admission.test_tokens import KEYS, new_operation


async def test_the_reset_page_is_off_unless_turned_on(api: TestClient[Any, Any]) -> None:
    op = await new_operation(api, ALICE[1].account_id)
    query = {"operation": op, "token": KEYS.derive(op)}
    assert (await api.get("/reset-password", params=query)).status == 404
    assert (await api.post("/reset-password", data=query)).status in (404, 405)


async def test_the_page_shows_a_form_and_consumes_the_token_once(
    redis: Redis, redis_server: Any
) -> None:
    await seed_directory(redis)
    async with serving(admission_settings(redis_server.url, local_reset_page=True)) as http:
        op = await new_operation(http, ALICE[1].account_id)
        fields = {"operation": op, "token": KEYS.derive(op)}
        page = await http.get("/reset-password", params=fields)
        assert page.status == 200 and "<form" in await page.text()
        assert page.headers["Cache-Control"] == "no-store"
        # Opening the link (what a mail scanner does) consumed nothing.
        key = PartitionKeys(_partition(op)).operation(op)
        assert await redis.hget(key, "token_consumed_at") in (None, "", "0")
        first = await answer(http.post("/reset-password", data={**fields, "password": "x"}))
        again = await answer(http.post("/reset-password", data={**fields, "password": "x"}))
        wrong = await answer(http.post("/reset-password", data={**fields, "token": "A" * 43}))
        incomplete = await answer(http.get("/reset-password", params={"operation": op}))
    assert first[0] == 200 and "Done" in first[1]
    assert again[0] == 409 and "already been used" in again[1]
    assert wrong[0] == 403
    assert incomplete[0] == 400


async def answer(request: Any) -> tuple[int, str]:
    async with request as response:
        return response.status, await response.text()


def _partition(operation_id: str) -> int:
    partition = operation_partition(operation_id, 4)
    assert partition is not None
    return partition


async def test_a_used_link_says_so_when_opened_not_after_a_new_password(
    redis: Redis, redis_server: Any
) -> None:
    await seed_directory(redis)
    async with serving(admission_settings(redis_server.url, local_reset_page=True)) as http:
        op = await new_operation(http, ALICE[1].account_id)
        fields = {"operation": op, "token": KEYS.derive(op)}
        used = await answer(http.post("/reset-password", data={**fields, "password": "x"}))
        assert used[0] == 200
        opened = await answer(http.get("/reset-password", params=fields))
        forged = await answer(http.get("/reset-password", params={**fields, "token": "A" * 43}))
        await redis.hset(PartitionKeys(_partition(op)).operation(op), "token_consumed_at", 0)
        await redis.hset(PartitionKeys(_partition(op)).operation(op), "token_expires_at", 1)
        expired = await answer(http.get("/reset-password", params=fields))
    assert opened[0] == 409 and "already been used" in opened[1] and "<form" not in opened[1]
    assert forged[0] == 403 and "<form" not in forged[1]  # nothing about the op without its token
    assert expired[0] == 410 and "<form" not in expired[1], expired


async def test_the_page_speaks_the_players_language_and_english_otherwise(
    redis: Redis, redis_server: Any
) -> None:
    """A French player's browser asks for French: the page answers in French, as the email
    did; a language the page has no words for, or one the browser refuses (q=0), reads
    English rather than a guess."""
    await seed_directory(redis)
    async with serving(admission_settings(redis_server.url, local_reset_page=True)) as http:
        op = await new_operation(http, ALICE[1].account_id)
        fields = {"operation": op, "token": KEYS.derive(op)}
        pages = {}
        for asked in ("fr-CA,fr;q=0.9,en;q=0.5", "sw,en;q=0.1", "fr;q=0", "es;q=0.2,de;q=0.4", ""):
            async with http.get(
                "/reset-password", params=fields, headers={"Accept-Language": asked}
            ) as page:
                pages[asked] = (page.status, await page.text())
        used = await answer(http.post("/reset-password", data=fields))
        async with http.post(
            "/reset-password", data=fields, headers={"Accept-Language": "fr"}
        ) as again:
            refused = again.status, await again.text()
    french = pages["fr-CA,fr;q=0.9,en;q=0.5"]
    assert french[0] == 200 and '<html lang="fr">' in french[1]
    assert "Nouveau mot de passe" in french[1] and "New password" not in french[1]
    assert '<html lang="en">' in pages["sw,en;q=0.1"][1]  # no Swahili words: English
    assert '<html lang="en">' in pages["fr;q=0"][1]  # q=0 is "not French"
    assert '<html lang="de">' in pages["es;q=0.2,de;q=0.4"][1]  # the weights, not the order
    assert '<html lang="en">' in pages[""][1] and "New password" in pages[""][1]
    assert used[0] == 200
    assert refused[0] == 409 and "déjà été utilisé" in refused[1]

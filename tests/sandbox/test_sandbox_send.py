"""POST /email/send: every row of the contract's send table, against a real server."""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest

from tests.support.sandbox import run_sandbox


async def test_accepted_send_returns_message_id(provider):
    reply = await provider.send()
    assert reply.status == 200
    assert reply.body["id"].startswith("msg_")
    assert "Idempotent-Replayed" not in reply.headers


async def test_accepted_status_can_be_202(open_provider):
    async with open_provider(accepted_status=202) as p:
        first = await p.send()
        again = await p.send()
    assert (first.status, again.status) == (202, 202)
    assert again.body == first.body


async def test_replay_returns_original_response_and_sends_no_second_email(provider):
    first = await provider.send(key="op-replay")
    again = await provider.send(key="op-replay")
    assert again.status == 200
    assert again.body == first.body
    assert again.headers["Idempotent-Replayed"] == "true"
    stats = await provider.stats(idempotency_key="op-replay")
    assert stats["emails_sent_total"] == 1
    assert stats["replays_total"] == 1
    assert stats["sent_by_key"] == {"op-replay": 1}
    assert stats["duplicate_sends_total"] == 0


async def test_replay_with_a_different_body_is_counted(provider):
    await provider.send(key="op-m", text="token A")
    again = await provider.send(key="op-m", text="token B")
    assert again.headers["Idempotent-Replayed"] == "true"
    assert (await provider.stats())["idempotency_body_mismatches_total"] == 1


async def test_sends_without_key_are_not_deduplicated(provider):
    await provider.send(key=None)
    await provider.send(key=None)
    assert (await provider.stats())["emails_sent_total"] == 2


async def test_same_key_while_first_is_in_flight_gets_409(open_provider):
    # The first send held 2 s once it has arrived (not after a fixed 0.1 s: a loaded machine
    # can take longer to deliver it), the second sent while it is held.
    async with open_provider(slow_every=1, slow_seconds=2.0) as p:
        first = asyncio.create_task(p.send(key="op-slow"))
        await _until(p, lambda stats: stats["slow_responses_total"] == 1)
        second = await p.send(key="op-slow")
        assert second.status == 409
        assert (await first).status == 200
        await p.control("POST", "/_sandbox/config", json={"slow_every": 0})
        third = await p.send(key="op-slow")
        assert third.headers["Idempotent-Replayed"] == "true"
        stats = await p.stats()
    assert stats["conflicts_total"] == 1
    assert stats["emails_sent_total"] == 1


async def test_client_timeout_on_slow_send_is_ambiguous_but_provider_accepted(open_provider):
    async with open_provider(slow_every=1, slow_seconds=0.3) as p:
        with pytest.raises(TimeoutError):
            await p.send(key="op-timeout", timeout=aiohttp.ClientTimeout(total=0.1))
        # Recorded once the handler's slow wait is over (after the client gave up).
        await _until(p, lambda stats: stats["emails_sent_total"] == 1)
        found = await p.get("/email/messages", params={"idempotency_key": "op-timeout"})
    assert [m["idempotency_key"] for m in found.body["data"]] == ["op-timeout"]


async def test_dropped_connection_is_seen_by_client_and_the_email_was_sent(open_provider):
    async with open_provider(drop_every=1) as p:
        with pytest.raises((aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)):
            await p.send(key="op-drop")
        found = await p.get("/email/messages", params={"idempotency_key": "op-drop"})
        assert found.body["data"][0]["status"] == "accepted"
        await p.control("POST", "/_sandbox/config", json={"drop_every": 0})
        retry = await p.send(key="op-drop")
        stats = await p.stats()
    assert retry.headers["Idempotent-Replayed"] == "true"
    assert retry.body["id"] == found.body["data"][0]["id"]
    assert stats["dropped_connections_total"] == 1
    assert stats["emails_sent_total"] == 1


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b'{"subject": "no to"}',
        b'{"to": []}',
        b'{"to": "a@b.example"}',
        b'{"to": ["not-an-address"]}',
        b'{"to": ["a@b.example"], "text": 5}',
        b"[1, 2]",
    ],
)
async def test_malformed_send_bodies_get_400(provider, body):
    reply = await provider.request(
        "POST", "/email/send", data=body, headers={"Content-Type": "application/json"}
    )
    assert reply.status == 400
    assert reply.body["error"] in {"malformed_json", "invalid_request"}
    assert (await provider.stats())["emails_sent_total"] == 0


async def test_empty_idempotency_key_gets_400(provider):
    assert (await provider.send(key="")).status == 400


async def test_huge_bodies_get_413_with_or_without_content_length(open_provider):
    async with open_provider(max_body_bytes=4096) as p:
        sized = await p.send(text="x" * 10_000)

        async def chunks():
            yield b'{"to": ["a@b.example"], "text": "'
            for _ in range(10):
                yield b"y" * 1000
            yield b'"}'

        chunked = await p.request("POST", "/email/send", data=chunks())
        streamed = await p.request("POST", "/email/send", data=io.BytesIO(b"z" * 5_000_000))
    assert (sized.status, chunked.status, streamed.status) == (413, 413, 413)


async def test_reject_domain_gets_422(open_provider):
    async with open_provider(reject_domain="Blocked.Example") as p:
        rejected = await p.send(key="op-r", to="someone@blocked.example")
        fine = await p.send(key="op-f", to="someone@fine.example")
        stats = await p.stats()
    assert (rejected.status, fine.status) == (422, 200)
    assert stats["rejected_total"] == 1
    assert stats["emails_sent_total"] == 1


@pytest.mark.parametrize("auth", [None, "Bearer wrong", "Basic c2FuZGJveC1rZXk=", "sandbox-key"])
async def test_missing_or_wrong_key_gets_401(provider, auth):
    headers = {"Authorization": auth} if auth is not None else {}
    provider.auth = {}
    reply = await provider.send(headers=headers)
    assert reply.status == 401
    polled = await provider.get("/email/events", headers=headers)
    assert polled.status == 401


@pytest.mark.parametrize("status", [401, 403])
async def test_revoked_credentials_switch(provider, status):
    await provider.control("POST", "/_sandbox/config", json={"revoked_status": status})
    assert (await provider.send()).status == status
    assert (await provider.events()).status == status
    await provider.control("POST", "/_sandbox/config", json={"revoked_status": 0})
    assert (await provider.send()).status == 200


async def test_injected_5xx_every_nth_sends_nothing(open_provider):
    async with open_provider(error_every=2, error_status=502) as p:
        statuses = [(await p.send(key=f"op-{i}")).status for i in range(4)]
        stats = await p.stats()
    assert statuses == [200, 502, 200, 502]
    assert stats["emails_sent_total"] == 2
    assert stats["injected_errors_total"] == 2


async def test_fault_probability_is_reproducible_with_a_seed():
    async def pattern() -> list[int]:
        async with (
            run_sandbox(error_probability=0.5, seed=42) as base_url,
            aiohttp.ClientSession() as session,
        ):
            statuses = []
            for i in range(30):
                async with session.post(
                    f"{base_url}/email/send",
                    json={"to": ["p@example.com"]},
                    headers={"Authorization": "Bearer sandbox-key", "Idempotency-Key": f"k{i}"},
                ) as response:
                    statuses.append(response.status)
            return statuses

    first, second = await pattern(), await pattern()
    assert first == second
    assert {200, 503} == set(first)


async def test_test_view_shows_the_email_actually_received(provider):
    sent = await provider.send(key="op-body", text="your link: https://x.example/r?t=TOKEN1")
    body = await provider.control("GET", f"/_sandbox/messages/{sent.body['id']}")
    assert body["email"]["text"] == "your link: https://x.example/r?t=TOKEN1"
    assert body["operation_id"] == "op-body"
    listed = await provider.control("GET", "/_sandbox/messages", params={"operation_id": "op-body"})
    assert [m["id"] for m in listed["data"]] == [sent.body["id"]]
    missing = await provider.control("GET", "/_sandbox/messages/msg_nope")
    assert missing["error"] == "not_found"


async def _until(provider: Any, condition: Callable[[dict[str, Any]], bool]) -> None:
    """Polls the sandbox's stats until ``condition`` holds (10 s at most)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if condition(await provider.stats()):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached in time")

"""``messages_file``: the messages a sandbox received survive its restart (the local stack's
`make run` after Ctrl-C), readable by their owner only; without it nothing is kept."""

from __future__ import annotations

from pathlib import Path

from tests.sandbox.conftest import OpenProvider


async def test_messages_and_their_keys_survive_a_restart(
    open_provider: OpenProvider, tmp_path: Path
) -> None:
    path = tmp_path / "messages.json"
    async with open_provider(messages_file=str(path), delivered_delay_seconds=0.0) as before:
        first = await before.send(key="op-kept")
        await before.get("/_sandbox/messages?operation_id=op-kept")  # its event, materialised
    assert path.stat().st_mode & 0o077 == 0, "reset links inside: owner only"
    async with open_provider(messages_file=str(path)) as after:
        listed = await after.get("/_sandbox/messages?operation_id=op-kept")
        again = await after.send(key="op-kept")  # a replay after the restart
        stats = await after.stats(idempotency_key="op-kept")
    (message,) = listed.body["data"]
    assert message["id"] == first.body["id"] and "reset: https://game.example" in str(message)
    assert again.body == first.body and again.headers["Idempotent-Replayed"] == "true"
    assert stats["emails_sent_total"] == 0, "the restarted sandbox sent nothing new"


async def test_without_a_file_nothing_is_kept(open_provider: OpenProvider) -> None:
    async with open_provider() as before:
        await before.send(key="op-gone")
    async with open_provider() as after:
        listed = await after.get("/_sandbox/messages?operation_id=op-gone")
    assert listed.body["data"] == []

"""A provider's message id is stored only in the shape the store keeps (RFC 5322's msg-id
left part, which holds every provider's documented id: shared/ids.py): an accepted answer
naming its message by an address, a newline or an escape sequence names none, and the send
is ambiguous (reconciled), never stored as given. On a real HTTP server."""

from __future__ import annotations

import aiohttp
import pytest

from shared import ids
from shared.model import Outcome
from tests.providers.conftest import Scripted
from tests.providers.kinds import adapter, success

MESSAGE = {
    "from": "Recovery <no-reply@game.example>",
    "to": ["p@example.com"],
    "subject": "Reset",
    "text": "link",
    "html": "<a>link</a>",
}
HOSTILE = ["victim@example.com", "m-1\nstate: accepted", "m-1\x1b]0;owned\x07", "m 1", "x" * 257]


@pytest.mark.parametrize("hostile", HOSTILE)
async def test_a_hostile_message_id_in_an_accepted_answer_is_not_stored(
    scripted: Scripted, hostile: str
) -> None:
    scripted.script(success("postmark", hostile))
    async with aiohttp.ClientSession() as session:
        result = await adapter("postmark", session, scripted.url).send("op-1-ABC", MESSAGE)
    assert result.outcome is Outcome.AMBIGUOUS and not result.message_id, result


def test_every_documented_shape_is_kept() -> None:
    documented = [
        "W86EgYT6SQKk0lRflfLRsA",  # SendGrid X-Message-Id
        "b7bc2f4a-e38e-4336-af7d-e6c392c2f817",  # Postmark MessageID
        "20111114174239.25659.5817",  # Mailgun, without <> and @domain
        "0000014a0f9f2d2a-7ea1f1e5-8a8d-4a9c-9b3c-5f1e6a2b3c4d-000000",  # SES MessageId
        "msg_0123456789abcdef0123",  # the sandbox's
    ]
    assert all(ids.valid_provider_message_id(v) for v in documented)

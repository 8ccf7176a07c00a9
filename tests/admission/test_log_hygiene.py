"""docs/design.md invariant 8 at the edge: driving the API logs no address, login, token or URL."""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest
from redis.asyncio import Redis

from shared.logging import JsonFormatter
from shared.tokens import parse_keys
from tests.admission.helpers import (
    ALICE,
    BOB,
    admission_settings,
    consume,
    internal_admit,
    public,
    seed_directory,
    serving,
)
from tests.admission.test_edges import BrokenDirectory
from tests.conftest import TEST_TOKEN_KEYS

EMAIL = re.compile(r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}")


class RawRecords(logging.Handler):
    """Every record as the app emitted it, before the formatter's scrubbing."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.raw: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.raw.append(
            repr(
                (
                    record.getMessage(),
                    getattr(record, "fields", None),
                    record.exc_info and str(record.exc_info[1]),
                )
            )
        )


@pytest.fixture
def captured() -> Iterator[tuple[io.StringIO, RawRecords]]:
    lines = io.StringIO()
    formatted = logging.StreamHandler(lines)
    formatted.setFormatter(JsonFormatter("admission"))
    formatted.setLevel(logging.DEBUG)
    raw = RawRecords()
    root = logging.getLogger()
    level = root.level
    root.addHandler(formatted)
    root.addHandler(raw)
    root.setLevel(logging.DEBUG)
    yield lines, raw
    root.removeHandler(formatted)
    root.removeHandler(raw)
    root.setLevel(level)


async def test_driving_the_api_logs_no_address_login_token_or_url(
    redis: Redis, redis_server: Any, captured: tuple[io.StringIO, RawRecords]
) -> None:
    await seed_directory(redis)
    keys = parse_keys(TEST_TOKEN_KEYS)
    settings = admission_settings(redis_server.url, ip_limit_per_minute=60, ip_limit_burst=3)
    async with serving(settings) as http:
        for login in (ALICE[0], BOB[0], "nobody@example.com", "ghost_player", ALICE[0]):
            await public(http, login)  # the fourth and fifth are rate limited
        await http.post(
            "/v1/password-resets",
            data=b'{"login": "x@example.com"',
            headers={"Content-Type": "application/json"},
        )
        op = (await (await internal_admit(http, BOB[1].account_id)).json())["operation_id"]
        tokens = [keys.derive(op), keys.derive(op + "x")]
        await consume(http, op, tokens[1])
        await consume(http, op, tokens[0])
        await consume(http, op, tokens[0])
    async with serving(admission_settings(redis_server.url), directory=BrokenDirectory()) as http:
        assert (await public(http, "carol.player@example.com")).status == 500
    lines, raw = captured
    text = lines.getvalue()
    assert "unhandled error" in text  # the capture works: the 500 was logged
    secrets = [
        ALICE[0],
        BOB[0],
        "ghost_player",
        "carol.player",
        ALICE[1].email,
        BOB[1].email,
        *tokens,
    ]
    for where in (text, "\n".join(raw.raw)):
        assert not EMAIL.search(where)
        assert not re.search(r"https?://", where)
        for secret in secrets:
            assert secret not in where

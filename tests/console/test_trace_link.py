"""An operation's page names the trace its admission started, linked to the trace UI when
``RESETGATE_CONSOLE_TRACE_URL`` is set; a stored value that is not a W3C traceparent is
shown as no trace at all (never echoed into the page)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError
from redis.asyncio import Redis

from shared.keys import TRACE_FIELD, PartitionKeys
from tests.console.helpers import console, console_settings, get_text, sign_in

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
UI = "https://jaeger.example/trace/{trace_id}"


async def page_with(redis: Redis, redis_url: str, traceparent: str | None, **settings: str) -> str:
    from tests.console.test_console_http import _admit

    op = await _admit(redis, redis_url, "acct-traced")
    if traceparent is not None:
        await redis.hset(PartitionKeys.of(op).operation(op), TRACE_FIELD, traceparent)
    async with console(console_settings(redis_url, **settings)) as http:
        return await get_text(http, f"/console/operations/{op}", await sign_in(http))


async def test_the_operation_page_links_its_trace(redis: Redis, redis_server: Any) -> None:
    page = await page_with(redis, redis_server.url, TRACEPARENT, console_trace_url=UI)
    assert f'<a href="https://jaeger.example/trace/{TRACE_ID}">{TRACE_ID}</a>' in page


async def test_without_a_trace_ui_the_id_is_shown(redis: Redis, redis_server: Any) -> None:
    page = await page_with(redis, redis_server.url, TRACEPARENT)
    assert f"<dt>Trace</dt><dd><code>{TRACE_ID}</code></dd>" in page


@pytest.mark.parametrize(
    "stored",
    [None, '00-"><script>alert(1)</script>-x-01', "00-" + "0" * 32 + "-00f067aa0ba902b7-01"],
)
async def test_no_trace_or_not_a_traceparent_reads_not_traced(
    redis: Redis, redis_server: Any, stored: str | None
) -> None:
    page = await page_with(redis, redis_server.url, stored, console_trace_url=UI)
    assert "<dt>Trace</dt><dd>not traced</dd>" in page and "<script>alert" not in page


def test_a_trace_url_without_the_id_placeholder_is_refused(redis_server: Any) -> None:
    with pytest.raises(ValidationError, match="console_trace_url"):
        console_settings(redis_server.url, console_trace_url="https://jaeger.example/trace/")

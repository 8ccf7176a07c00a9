"""Fixtures for the sandbox provider's own tests: a real server, spoken to over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest

from tests.support.sandbox import SANDBOX_API_KEY, run_sandbox


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: Any


class Provider:
    """A thin client of one sandbox: contract calls with the right key by default."""

    def __init__(self, base_url: str, session: aiohttp.ClientSession) -> None:
        self.base_url = base_url
        self.session = session
        self.auth = {"Authorization": f"Bearer {SANDBOX_API_KEY}"}

    async def request(self, method: str, path: str, **kwargs: Any) -> Reply:
        headers = {**self.auth, **kwargs.pop("headers", {})}
        async with self.session.request(
            method, self.base_url + path, headers=headers, **kwargs
        ) as response:
            body = await response.json(content_type=None)
            return Reply(response.status, dict(response.headers), body)

    async def send(
        self,
        key: str | None = "op-1",
        to: str = "player@example.com",
        text: str = "reset: https://game.example/reset?t=abc",
        headers: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> Reply:
        extra = dict(headers or {})
        if key is not None:
            extra["Idempotency-Key"] = key
        email = {
            "from": "noreply@game.example",
            "to": [to],
            "subject": "Reset your password",
            "text": text,
            "tags": {"operation_id": key or "none"},
        }
        return await self.request("POST", "/email/send", json=email, headers=extra, **kwargs)

    async def get(self, path: str, **kwargs: Any) -> Reply:
        return await self.request("GET", path, **kwargs)

    async def control(self, method: str, path: str, **kwargs: Any) -> Any:
        async with self.session.request(method, self.base_url + path, **kwargs) as response:
            return await response.json()

    async def stats(self, **query: str) -> Any:
        return await self.control("GET", "/_sandbox/stats", params=query)

    async def events(self, after: str = "0", limit: int = 100) -> Reply:
        return await self.get("/email/events", params={"after": after, "limit": str(limit)})


OpenProvider = Callable[..., AbstractAsyncContextManager[Provider]]


@asynccontextmanager
async def _open_provider(**settings: Any) -> AsyncIterator[Provider]:
    async with run_sandbox(**settings) as base_url, aiohttp.ClientSession() as session:
        yield Provider(base_url, session)


@pytest.fixture
def open_provider() -> OpenProvider:
    """``async with open_provider(**settings) as provider`` starts a sandbox for one test."""
    return _open_provider


@pytest.fixture
async def provider() -> AsyncIterator[Provider]:
    async with _open_provider(delivered_delay_seconds=0.0) as opened:
        yield opened

"""A provider double on a real loopback HTTP server that answers a scripted sequence and
records every request, for classification and retry tests of each adapter."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web

from tests.sender.conftest import Stack, sender_settings  # noqa: F401  (re-exported fixtures)


@dataclass
class Scripted:
    """Answers ``answers`` in turn (the last one repeats); keeps what was asked."""

    answers: list[tuple[int, dict[str, str], bytes]] = field(default_factory=list)
    requests: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)
    url: str = ""

    def script(self, *answers: tuple[int, dict[str, str], bytes]) -> None:
        self.answers = list(answers)

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.append(
            (request.method, request.path_qs, dict(request.headers), await request.read())
        )
        status, headers, body = self.answers[0] if len(self.answers) == 1 else self.answers.pop(0)
        return web.Response(status=status, headers=headers, body=body or None)


@pytest.fixture
async def scripted() -> AsyncIterator[Scripted]:
    state = Scripted()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", state.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    state.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    yield state
    await runner.cleanup()

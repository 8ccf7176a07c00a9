"""An OTLP/HTTP trace receiver for tests: ``POST /v1/traces`` with a protobuf
``ExportTraceServiceRequest``, decoded with opentelemetry-proto's own classes and answered
with an ``ExportTraceServiceResponse``, as the OTLP specification's HTTP transport says
(https://opentelemetry.io/docs/specs/otlp/#otlphttp): binary protobuf, status 200, and the
same content type back. A gzip body (``Content-Encoding: gzip``) is accepted too.

    async with OtlpReceiver() as receiver:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
        ...
        spans = await receiver.wait_for(lambda spans: any(s.name == "admit script" for s in spans))
"""

from __future__ import annotations

import asyncio
import gzip
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from services.ctl.embedded import free_port
from shared.logging import scrub

PROTOBUF = "application/x-protobuf"


@dataclass(frozen=True)
class Span:
    """One exported span, flattened: ids as lowercase hex, attributes as plain values."""

    service: str
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    attributes: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)
    # (trace id, span id, tracestate, attributes) of each span linked to
    links: list[tuple[str, str, str, dict[str, Any]]] = field(default_factory=list)
    resource: dict[str, Any] = field(default_factory=dict)  # the process's, as exported
    status: str = ""  # the status message, if any
    trace_state: str = ""  # the W3C tracestate the span carries (its trace's vendors')


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    if kind == "kvlist_value":
        return _attributes(any_value.kvlist_value.values)
    return getattr(any_value, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


def _spans(request: ExportTraceServiceRequest) -> list[Span]:
    found = []
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        service = str(resource.get("service.name", ""))
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                found.append(
                    Span(
                        service,
                        span.name,
                        span.trace_id.hex(),
                        span.span_id.hex(),
                        span.parent_span_id.hex(),
                        span.kind,
                        _attributes(span.attributes),
                        [{"name": e.name, **_attributes(e.attributes)} for e in span.events],
                        [
                            (
                                link.trace_id.hex(),
                                link.span_id.hex(),
                                link.trace_state,
                                _attributes(link.attributes),
                            )
                            for link in span.links
                        ],
                        resource,
                        span.status.message,
                        span.trace_state,
                    )
                )
    return found


class OtlpReceiver:
    def __init__(self) -> None:
        self.port = free_port()
        self.spans: list[Span] = []
        self.requests = 0
        self._arrived = asyncio.Event()
        app = web.Application()
        app.router.add_post("/v1/traces", self._traces)
        self._runner = web.AppRunner(app, access_log=None)

    @property
    def endpoint(self) -> str:
        """The base URL, for ``OTEL_EXPORTER_OTLP_ENDPOINT`` (the exporter adds /v1/traces)."""
        return f"http://127.0.0.1:{self.port}"

    async def _traces(self, request: web.Request) -> web.Response:
        if request.content_type != PROTOBUF:
            return web.Response(status=415, text="binary protobuf only")
        body = await request.read()
        if request.headers.get("Content-Encoding", "") == "gzip":
            body = gzip.decompress(body)
        message = ExportTraceServiceRequest()
        message.ParseFromString(body)
        self.requests += 1
        self.spans.extend(_spans(message))
        self._arrived.set()
        reply = ExportTraceServiceResponse().SerializeToString()
        return web.Response(body=reply, content_type=PROTOBUF)

    async def wait_for(
        self, condition: Callable[[list[Span]], bool], timeout: float = 30.0
    ) -> list[Span]:
        """Every span received once ``condition`` holds for them (else TimeoutError)."""
        async with asyncio.timeout(timeout):
            while not condition(self.spans):
                self._arrived.clear()
                await self._arrived.wait()
        return list(self.spans)

    async def __aenter__(self) -> OtlpReceiver:
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self._runner.cleanup()


def _texts(span: Span) -> list[str]:
    values: list[Any] = [span.name, span.status, span.trace_state, *span.attributes.values()]
    values.extend(span.resource.values())
    for span_event in span.events:
        values.extend(span_event.values())
    for *_, trace_state, attributes in span.links:
        values.extend([trace_state, *attributes.values()])
    return [str(value) for value in values]


# An HTTP span's own URL (the instrumentations' ``http.url``): a URL is allowed there, but
# only with no query string and not the reset page's (whose link holds the token).
_HTTP_URL = re.compile(r"https?://([^\s?#]*)")
RESET_PAGE = "reset-password"


def _leaks(text: str, literals: tuple[str, ...]) -> bool:
    if any(literal in text for literal in literals):
        return True
    url = _HTTP_URL.fullmatch(text)
    if url is not None:
        return RESET_PAGE in text or scrub(url.group(1)) != url.group(1)
    return scrub(text) != text


def personal(spans: list[Span], *literals: str) -> list[tuple[str, str]]:
    """(span name, text) for every span name, status, tracestate, attribute, event, link
    (its tracestate and attributes) or resource attribute that holds what the logs may never
    hold (an address, a URL, a token: shared.logging.scrub's patterns, so both say the same;
    an HTTP span's URL without a query string is no leak) or one of ``literals`` (a login,
    an account's address)."""
    found = []
    for span in spans:
        for text in _texts(span):
            if _leaks(text, literals):
                found.append((span.name, text))
    return found

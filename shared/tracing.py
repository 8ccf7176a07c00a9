"""Traces over OTLP/HTTP, configured only by the standard ``OTEL_*`` settings, and off unless
they name somewhere to send them.

Off (no ``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or
``OTEL_TRACES_EXPORTER=otlp``): no provider is installed, so every tracer is the API's no-op
one: no span is recorded, nothing is exported, and no thread is started. On: the SDK's
provider with a batching OTLP/HTTP exporter; the SDK itself reads the rest of the standard
settings (``OTEL_TRACES_SAMPLER`` and its argument, ``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_EXPORTER_OTLP_HEADERS``, ``OTEL_BSP_*``).
``OTEL_SDK_DISABLED=true`` turns it off whatever else is set.

On, the OpenTelemetry aiohttp instrumentations add the HTTP client and server spans (the
provider's answer, the webhook a provider posts, each request admission serves), and Redis
command spans are added when ``RESETGATE_TRACE_REDIS_COMMANDS`` asks (they are many): the
command's name only, never its arguments. Propagation is W3C trace context only, in and out.

Span attributes name the work (operation id, partition, attempt, provider), never a person:
no email address, login, token or reset URL is ever given to a span. A client span's URL
keeps no query string (the account directory is asked ``?login=``), and the pages whose
query string holds a secret (the local reset page's token) get no server span.
"""

from __future__ import annotations

import logging
import os
import re
import weakref
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from shared.logging import event

if TYPE_CHECKING:
    from opentelemetry.util.types import Attributes
    from yarl import URL

    from shared.redis import RedisClient

log = logging.getLogger(__name__)

# The exporters this module can build; OTEL_TRACES_EXPORTER names them as the SDK does.
OTLP_EXPORTERS = frozenset({"otlp", "otlp_proto_http"})
ENDPOINT_SETTINGS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
SERVICE_PREFIX = "resetgate-"
INSTALLED = "traces exported over OTLP/HTTP"  # the log line that says tracing is on
# Attribute names, one place: what a span may say about the work it did.
OPERATION_ID = "resetgate.operation.id"
PARTITION = "resetgate.partition"
ATTEMPT = "resetgate.attempt"
PROVIDER = "resetgate.provider"
RESULT = "resetgate.result"
# Request paths (regular expressions, as OTEL_PYTHON_AIOHTTP_SERVER_EXCLUDED_URLS takes them)
# that get no server span: the local reset page, whose query string is the reset link (its
# token), and the operational listener's probes and scrapes, which say nothing every few
# seconds. Added to whatever that standard setting excludes.
UNTRACED_PATHS = ("^/reset-password$", "^/(healthz|readyz|metrics)$")
SERVER_EXCLUDED = "OTEL_PYTHON_AIOHTTP_SERVER_EXCLUDED_URLS"
SEMCONV = "OTEL_SEMCONV_STABILITY_OPT_IN"
# W3C trace context only (traceparent, tracestate): a caller's baggage is never read, so
# nothing it put there can reach our spans or our streams.
_W3C = TraceContextTextMapPropagator()
_installed = False  # set once setup() has installed the SDK's provider
_redis_traced: weakref.WeakSet[object] = weakref.WeakSet()  # clients with command spans


class Tracer:
    """A module's tracer. Off, a span is a ``nullcontext`` holding the invalid span: one
    flag test, where the API's no-op tracer still attaches a context per span (about 2 % of
    the sender's CPU in a storm, four spans an email)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._tracer: trace.Tracer | None = None  # the SDK's, once installed

    def start_as_current_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Attributes = None,
        links: Sequence[trace.Link] | None = None,
        start_ms: int = 0,
    ) -> AbstractContextManager[trace.Span]:
        """``start_ms``: when the work began, if before now (a job claimed, then paced)."""
        if not _installed:
            return _NOT_RECORDED
        if self._tracer is None:
            self._tracer = trace.get_tracer(self.name)
        start = start_ms * 1_000_000 if start_ms else None
        return self._tracer.start_as_current_span(name, context, kind, attributes, links, start)


_NOT_RECORDED = nullcontext(trace.INVALID_SPAN)  # reusable: nullcontext keeps no state


def tracer(name: str) -> Tracer:
    """The tracer for module ``name``: it records nothing until :func:`setup` installs the
    SDK."""
    return Tracer(name)


def current() -> tuple[str, str]:
    """The current span's W3C ``traceparent`` and ``tracestate`` (the caller's vendors'
    entries, "" when none), to store beside the work it hands on; ("", "") with traces off.
    An unsampled span's goes too (flags 00): the work it hands on is then left unsampled
    alike, not sampled again as a new trace."""
    if not _installed or not trace.get_current_span().get_span_context().is_valid:
        return "", ""
    carrier: dict[str, str] = {}
    _W3C.inject(carrier)
    return carrier.get("traceparent", ""), carrier.get("tracestate", "")


_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}")
_NO_TRACE = "0" * 32


def trace_id_of(traceparent: str) -> str:
    """The trace id a stored ``traceparent`` names ("" if none, or not one)."""
    match = _TRACEPARENT.fullmatch(traceparent)
    if match is None or match.group(1) == _NO_TRACE:
        return ""
    return match.group(1)


def enabled() -> bool:
    """Whether :func:`setup` installed the SDK (work that only feeds spans can skip)."""
    return _installed


def links(traceparent: str, tracestate: str = "") -> list[trace.Link]:
    """A link to the span ``traceparent`` names, with its ``tracestate`` (none if it is ""
    or malformed)."""
    carrier = {"traceparent": traceparent, "tracestate": tracestate}
    context = trace.get_current_span(continued(carrier))
    span_context = context.get_span_context()
    return [trace.Link(span_context)] if span_context.is_valid else []


def continued(carrier: Mapping[str, str]) -> Context:
    """The context a W3C ``traceparent`` in ``carrier`` names (an empty one if it names none
    or is malformed: a new trace starts)."""
    return _W3C.extract(carrier)


def wanted(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the standard settings ask for traces to be exported."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        return exporter in OTLP_EXPORTERS
    return any(environ.get(name, "").strip() for name in ENDPOINT_SETTINGS)


def setup(service: str, environ: Mapping[str, str] = os.environ) -> Callable[[], None]:
    """Install the SDK's provider when :func:`wanted`; returns what flushes and stops it at
    exit (a no-op when tracing is off)."""
    exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter and exporter not in OTLP_EXPORTERS and exporter != "none":
        event(
            log,
            logging.WARNING,
            "traces off: only the otlp exporter is built in",
            exporter=exporter,
        )
    if not wanted(environ):
        return _nothing
    return _install(service, environ)


def _nothing() -> None:
    return None


def redis_commands(client: RedisClient, like: RedisClient | None = None) -> None:
    """A span per Redis command of ``client`` (its name, never its arguments: the
    instrumentation writes ``EVALSHA ? ? ?``), when traces are on; with ``like``, only if
    that client has them (a client built on another, shared/fastredis.py)."""
    if not _installed or (like is not None and like not in _redis_traced):
        return
    from opentelemetry.instrumentation.redis import RedisInstrumentor

    RedisInstrumentor.instrument_client(client)
    _redis_traced.add(client)


def unrecorded_http() -> AbstractContextManager[object]:
    """No HTTP client span inside: the poller's periodic polls (of a feed, of a queue), a
    trace of their own every few seconds, would outnumber the resets' traces. A page that
    brings events has its own span (services/poller/traced.py)."""
    if not _installed:
        return _NOT_RECORDED
    from opentelemetry.instrumentation.utils import suppress_http_instrumentation

    return suppress_http_instrumentation()


def without_query(url: URL) -> str:
    """A client span's URL: no query string (it may hold a login), no credentials."""
    return str(url.with_query(None).with_user(None))


def _instrument_http(environ: Mapping[str, str]) -> None:
    """The instrumentation packages' HTTP client and server spans, for every session and
    application made from now on (tracing is set up before a service builds either)."""
    from opentelemetry.instrumentation.aiohttp_client import AioHttpClientInstrumentor
    from opentelemetry.instrumentation.aiohttp_server import AioHttpServerInstrumentor

    theirs = environ.get(SERVER_EXCLUDED) or environ.get("OTEL_PYTHON_EXCLUDED_URLS", "")
    # The instrumentations read their settings from the environment alone: the exclusions,
    # and the stable HTTP attribute names (``http.response.status_code``, as the sender's
    # own spans write it) unless the deployment chose otherwise.
    os.environ[SERVER_EXCLUDED] = ",".join(filter(None, (*UNTRACED_PATHS, theirs)))
    os.environ.setdefault(SEMCONV, environ.get(SEMCONV, "http"))
    AioHttpServerInstrumentor().instrument()
    AioHttpClientInstrumentor().instrument(url_filter=without_query)


def _install(service: str, environ: Mapping[str, str]) -> Callable[[], None]:
    global _installed
    # Imported here so a process with tracing off never loads the SDK or the exporter.
    from opentelemetry import propagate, trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: SERVICE_PREFIX + service}))
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    # What the instrumentations read and write: trace context, never a caller's baggage.
    propagate.set_global_textmap(_W3C)
    _instrument_http(environ)
    _installed = True
    event(log, logging.INFO, INSTALLED, service_name=str(resource.attributes.get(SERVICE_NAME)))
    return provider.shutdown

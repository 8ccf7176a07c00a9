"""Traces over OTLP/HTTP, configured only by the standard ``OTEL_*`` settings, and off unless
they name somewhere to send them.

Off (no ``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or
``OTEL_TRACES_EXPORTER=otlp``): no provider is installed, so every tracer is the API's no-op
one: no span is recorded, nothing is exported, and no thread is started. On: the SDK's
provider with a batching OTLP/HTTP exporter; the SDK itself reads the rest of the standard
settings (``OTEL_TRACES_SAMPLER`` and its argument, ``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_EXPORTER_OTLP_HEADERS``, ``OTEL_BSP_*``).
``OTEL_SDK_DISABLED=true`` turns it off whatever else is set.

Span attributes name the work (operation id, partition, attempt, provider), never a person:
no email address, login, token or reset URL is ever given to a span.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Mapping

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from shared.logging import event

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
# W3C trace context only (traceparent, tracestate): a caller's baggage is never read, so
# nothing it put there can reach our spans or our streams.
_W3C = TraceContextTextMapPropagator()
_installed = False  # set once setup() has installed the SDK's provider


def tracer(name: str) -> trace.Tracer:
    """The tracer for module ``name``: the no-op one until :func:`setup` installs the SDK."""
    return trace.get_tracer(name)


def traceparent() -> str:
    """The current span's W3C ``traceparent``, to store beside the work it hands on; ""
    with traces off. An unsampled span's goes too (flags 00): the work it hands on is then
    left unsampled alike, not sampled again as a new trace."""
    if not _installed or not trace.get_current_span().get_span_context().is_valid:
        return ""
    carrier: dict[str, str] = {}
    _W3C.inject(carrier)
    return carrier.get("traceparent", "")


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


def links(traceparent: str) -> list[trace.Link]:
    """A link to the span ``traceparent`` names (none if it is "" or malformed)."""
    context = trace.get_current_span(continued({"traceparent": traceparent}))
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
        event(log, logging.WARNING, "traces off: only the otlp exporter is built in",
              exporter=exporter)  # fmt: skip
    if not wanted(environ):
        return _nothing
    return _install(service)


def _nothing() -> None:
    return None


def _install(service: str) -> Callable[[], None]:
    global _installed
    # Imported here so a process with tracing off never loads the SDK or the exporter.
    from opentelemetry import trace
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
    _installed = True
    event(log, logging.INFO, INSTALLED,
          service_name=str(resource.attributes.get(SERVICE_NAME)))  # fmt: skip
    return provider.shutdown

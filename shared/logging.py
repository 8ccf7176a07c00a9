"""Structured JSON logs that cannot carry an email address, a token or a reset URL.

Services log with fields (``log.info("attempt finished", extra={"fields": {...}})`` or the
``event`` helper). Every rendered line passes through :func:`scrub`, so a careless field or
an exception message that quotes an address still leaves the process clean.
"""

from __future__ import annotations

import logging
import re
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web import RequestPayloadError
from opentelemetry.trace import format_span_id, format_trace_id, get_current_span

from shared import codec

# Every pattern is linear: each repetition is bounded (an RFC 5321 local part is at most 64
# octets, a domain label 63, and eight labels are plenty) or guarded by a look-behind, so a
# start costs a bounded number of steps; and scrub() cuts its input to MAX_SCRUB characters
# before any of them runs. Unbounded, a 200 KB line with no "@" took 29 s.
MAX_SCRUB = 16_384  # a rendered line: each field is cut first, to keep the line whole JSON
MAX_FIELD = 4_096
_EMAIL = re.compile(r"[A-Za-z0-9._%+\-]{1,64}@(?:[A-Za-z0-9\-]{1,63}\.){1,8}[A-Za-z]{2,63}")
_URL = re.compile(r"https?://[^\s\"']+")
# A derived token is 43 base64url characters (HMAC-SHA256, unpadded).
_TOKEN = re.compile(r"(?<![A-Za-z0-9_\-])[A-Za-z0-9_\-]{43}(?![A-Za-z0-9_\-])")
# AWS credentials as botocore's DEBUG lines print them: an access key id, and a SigV4
# signature (64 hex digits; a payload hash looks alike and goes too).
_AWS_KEY_PREFIXES = ("AKIA", "ASIA", "AROA", "AIDA")
_AWS_KEY_ID = re.compile(
    rf"(?<![A-Z0-9])(?:{'|'.join(_AWS_KEY_PREFIXES)})[A-Z0-9]{{12,124}}(?![A-Z0-9])"
)
_HEX_64 = re.compile(r"(?<![0-9a-fA-F])[0-9a-fA-F]{64}(?![0-9a-fA-F])")
# Terminal controls (C0, DEL, C1: ESC sequences recolour or rewrite a terminal) and the
# characters that reorder or hide text (bidi embeddings, overrides and isolates, zero-width
# and invisible formatting characters, line and paragraph separators).
_UNPRINTABLE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]+"
)
_CUT_AT = " \t\r\n\"'<>,;()[]{}"


def cut(text: str, limit: int) -> str:
    """At most ``limit`` characters; a longer text loses its tail from the last separator
    on, so the cut never leaves the head of an address or a token that the patterns would
    no longer recognise (``alice@exam``)."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    end = max(head.rfind(c) for c in _CUT_AT)
    return head[: max(end, 0)] + "[cut]"


def printable(text: str) -> str:
    """``text`` with every run of control or bidi characters made one space."""
    return _UNPRINTABLE.sub(" ", text)


def scrub(text: str) -> str:
    text = _URL.sub("[url]", cut(text, MAX_SCRUB))
    # A pattern whose every match holds a literal runs only where that literal is: the
    # same result, without a scan of the whole line per pattern (most lines have neither).
    if "@" in text:
        text = _EMAIL.sub("[email]", text)
    if any(prefix in text for prefix in _AWS_KEY_PREFIXES):
        text = _AWS_KEY_ID.sub("[aws-key-id]", text)
    text = _HEX_64.sub("[hex]", text)
    return _TOKEN.sub("[token]", text)


def _rendered(line: dict[str, Any]) -> str:
    """The line as JSON with each value cut to MAX_FIELD characters (a provider's 60 KB
    refusal, a 200 KB queue message), and shorter still if the line would pass MAX_SCRUB,
    so it stays whole JSON and scrub() sees all of it."""
    rendered = codec.dumps_str(line)
    if len(rendered) <= MAX_FIELD:
        # No value can be longer than the whole line: none would be cut (the same JSON),
        # and the usual line is rendered once, without a look at each value.
        return rendered
    rendered = codec.dumps_str({key: _bounded(value, MAX_FIELD) for key, value in line.items()})
    if len(rendered) <= MAX_SCRUB:
        return rendered
    share = MAX_SCRUB // (2 * len(line))  # half: escaping can double a value's length
    return codec.dumps_str({key: _bounded(value, share) for key, value in line.items()})


def _bounded(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return cut(value, limit)
    if isinstance(value, (dict, list, tuple)):
        rendered = codec.dumps_str(value)
        return value if len(rendered) <= limit else cut(rendered, limit)
    return value


class JsonFormatter(logging.Formatter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "service": self.service,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        line.update(_trace_fields())
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            line.update(fields)
        if record.exc_info and record.exc_info[1] is not None:
            line.update(_error_fields(record, record.exc_info[1]))
        return scrub(_rendered(line))


def _trace_fields() -> dict[str, str]:
    """``trace_id`` and ``span_id`` of the span the line was logged in, if it is recorded: a
    line names only a trace that can be looked up. (With traces off, the API's no-op span
    still carries a caller's ``traceparent``; that id is the caller's, not ours.)"""
    span = get_current_span()
    if not span.is_recording():
        return {}
    context = span.get_span_context()
    return {
        "trace_id": format_trace_id(context.trace_id),
        "span_id": format_span_id(context.span_id),
    }


# A malformed request head, or a body that does not decode (aiohttp logs the latter again,
# as "Unhandled exception", when it drains the body after our 400).
_CLIENTS_FAULT = (HttpProcessingError, RequestPayloadError)


def _error_fields(record: logging.LogRecord, error: BaseException) -> dict[str, str]:
    """aiohttp's messages quote the client's raw bytes (a malformed header line can hold the
    internal bearer, a cookie, a longer-than-43 run around a token that scrub() misses), so
    they keep only the type; a request the client got wrong is its problem, not an error."""
    if not record.name.startswith("aiohttp."):
        return {"error": f"{type(error).__name__}: {error}", "where": _where(error)}
    fields = {"error": type(error).__name__}
    if isinstance(error, _CLIENTS_FAULT) and record.levelno > logging.WARNING:
        fields["level"] = "warning"
    return fields


def _where(error: BaseException) -> str:
    """The innermost frames as file:line (function): where to look, with no values in it."""
    frames = traceback.extract_tb(error.__traceback__)[-4:]
    return " <- ".join(f"{Path(f.filename).name}:{f.lineno} ({f.name})" for f in reversed(frames))


def setup(service: str, level: str = "INFO") -> None:
    # A line carries none of the caller's file, line, function, thread or process
    # (JsonFormatter writes none of them): not looking them up is logging's documented
    # optimisation, and the sender logs a line per email.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(service))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # aiohttp's access log would print client paths and query strings: keep it off.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    # botocore's DEBUG is a wire dump: signed headers (the access key id, the signature) and
    # whole SQS bodies. RESETGATE_LOG_LEVEL=DEBUG is for resetgate's own lines.
    for wire in ("botocore", "aiobotocore", "urllib3"):
        logging.getLogger(wire).setLevel(max(logging.INFO, root.level))


def event(logger: logging.Logger, level: int, msg: str, **fields: Any) -> None:
    logger.log(level, msg, extra={"fields": fields})

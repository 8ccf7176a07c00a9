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

from shared import codec

_EMAIL = re.compile(r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}")
_URL = re.compile(r"https?://[^\s\"']+")
# A derived token is 43 base64url characters (HMAC-SHA256, unpadded).
_TOKEN = re.compile(r"(?<![A-Za-z0-9_\-])[A-Za-z0-9_\-]{43}(?![A-Za-z0-9_\-])")


def scrub(text: str) -> str:
    text = _URL.sub("[url]", text)
    text = _EMAIL.sub("[email]", text)
    return _TOKEN.sub("[token]", text)


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
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            line.update(fields)
        if record.exc_info and record.exc_info[1] is not None:
            line.update(_error_fields(record, record.exc_info[1]))
        return scrub(codec.dumps_str(line))


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
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(service))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # aiohttp's access log would print client paths and query strings: keep it off.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


def event(logger: logging.Logger, level: int, msg: str, **fields: Any) -> None:
    logger.log(level, msg, extra={"fields": fields})

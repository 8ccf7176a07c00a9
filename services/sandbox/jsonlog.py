"""Structured JSON-lines logging to stderr for the sandbox.

A small local logger so the sandbox stands alone; callers pass fields, never an email
address or a body (the sandbox only ever logs ids, counts, statuses and domains' absence).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import orjson

logger = logging.getLogger("resetgate.sandbox")


class JsonLineFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "service": "sandbox",
            "event": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            line.update(fields)
        if record.exc_info and record.exc_info[0] is not None:
            line["error"] = record.exc_info[0].__name__
        return orjson.dumps(line, default=str).decode()


def configure_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLineFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def log(event: str, level: int = logging.INFO, *, exc_info: bool = False, **fields: Any) -> None:
    if logger.isEnabledFor(level):
        logger.log(level, event, exc_info=exc_info, extra={"fields": fields})

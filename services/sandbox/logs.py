"""Sandbox logging on top of ``shared.logging`` (JSON lines on stderr, scrubbed).

Fields are ids, counts and statuses only: never an address, a subject or a body.
"""

from __future__ import annotations

import logging
from typing import Any

from shared.logging import setup

logger = logging.getLogger("services.sandbox")


def configure_logging(level: str) -> None:
    setup("sandbox", level.upper())


def log(event: str, level: int = logging.INFO, *, exc_info: bool = False, **fields: Any) -> None:
    if logger.isEnabledFor(level):  # cheap when the level is off (storm hot path)
        logger.log(level, event, exc_info=exc_info, extra={"fields": fields})

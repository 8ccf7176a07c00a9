"""The one error an HTTP edge answers with: a status, an error code and a message the caller
can act on (admission's API and console, the poller's webhooks)."""

from __future__ import annotations


class ApiError(Exception):
    def __init__(self, status: int, error: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message

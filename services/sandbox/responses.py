"""Small HTTP helpers shared by the provider and control routes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from aiohttp import web

from services.sandbox.state import Sandbox

SANDBOX = web.AppKey("sandbox", Sandbox)


def json_response(
    body: Any, status: int = 200, headers: Mapping[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=orjson.dumps(body), status=status, headers=headers, content_type="application/json"
    )


def error(
    status: int, code: str, message: str, headers: Mapping[str, str] | None = None
) -> web.Response:
    """Errors are JSON a caller can act on (the shape ``shared.service`` uses); no traceback."""
    return json_response({"error": code, "message": message}, status, headers)


async def read_limited(request: web.Request, limit: int) -> bytes | None:
    """The request body, or None when it is larger than ``limit`` bytes."""
    if request.content_length is not None and request.content_length > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.content.iter_any():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


async def read_json(request: web.Request, limit: int) -> Any | web.Response:
    """Parsed JSON, or the 413/400 response to answer instead."""
    raw = await read_limited(request, limit)
    if raw is None:
        response = error(413, "payload_too_large", f"request body exceeds {limit} bytes")
        # The rest of the body is never read: close rather than keep the connection around
        # draining it (which also held up shutdown by the full grace period).
        response.force_close()
        return response
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return error(400, "malformed_json", "request body is not valid JSON")


def bad_request(message: str) -> web.Response:
    return error(400, "invalid_request", message)


def non_negative_int(raw: str | None, default: int, name: str, maximum: int) -> int | str:
    """The query parameter as an int in [0, maximum], or an error message."""
    if raw is None or raw == "":
        return default
    if not raw.isdigit() or len(raw) > 18:
        return f"{name} must be a non-negative integer"
    value = int(raw)
    if value > maximum:
        return f"{name} must be at most {maximum}"
    return value

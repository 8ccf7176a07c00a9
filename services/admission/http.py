"""The edge: reading bodies, the bearer check, and turning every failure into JSON.

A caller always gets ``{"error", "message"}`` with a status it can act on; a traceback never
leaves the process, and the log line for an unexpected error carries only its type (a
message could quote a login, which is often an email address).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler
from redis.exceptions import RedisError

from services.admission.context import SETTINGS
from services.admission.gate import NotReplicated
from services.admission.schemas import BodySchema
from shared import codec
from shared.admit import AdmissionConflict
from shared.archive import ArchiveUnavailable
from shared.directory import DirectoryError
from shared.errors import ApiError
from shared.logging import event
from shared.redis import TRANSIENT_ERRORS
from shared.service import json_error

log = logging.getLogger("services.admission")

INTERNAL_PREFIX = "/internal/"
_REALM = 'Bearer realm="resetgate-internal"'
# Headers of aiohttp's own HTTP errors that still mean something in a JSON answer.
_KEPT_HEADERS = ("Allow", "Retry-After")


async def read_body(request: web.Request, schema: BodySchema) -> dict[str, str]:
    """The validated body, or :class:`ApiError` (413/415/408/400/422) before anything is
    written."""
    limit = request.app[SETTINGS].max_body_bytes
    length = request.content_length
    if length is not None and length > limit:
        raise ApiError(413, "body_too_large", f"the body must be at most {limit} bytes")
    if not _is_json(request):
        raise ApiError(415, "unsupported_media_type", "send Content-Type: application/json")
    timeout = request.app[SETTINGS].body_timeout_seconds
    try:
        raw = await _read(request, timeout)
    except web.HTTPRequestEntityTooLarge:
        raise ApiError(413, "body_too_large", f"the body must be at most {limit} bytes") from None
    except web.RequestPayloadError:  # e.g. Content-Encoding: gzip over bytes that are not gzip
        raise ApiError(
            400, "unreadable_body", "the body could not be decoded; check Content-Encoding"
        ) from None
    except TimeoutError:
        raise ApiError(
            408, "body_timeout", f"the body did not arrive within {timeout:g} s; send it at once"
        ) from None
    if len(raw) > limit:
        raise ApiError(413, "body_too_large", f"the body must be at most {limit} bytes")
    try:
        body: Any = codec.loads(raw)
    except codec.JSONDecodeError:
        raise ApiError(400, "malformed_json", "the body is not valid JSON") from None
    return schema.validate(body)


def _is_json(request: web.Request) -> bool:
    # The exact header skips aiohttp's Content-Type parser (several µs a request); anything
    # else ("application/json; charset=utf-8", other case) is parsed as before.
    return (
        request.headers.get("Content-Type") == "application/json"
        or request.content_type == "application/json"
    )


async def _read(request: web.Request, within_s: float) -> bytes:
    if request.content.is_eof():  # all of it arrived with the head: nothing to wait for
        return await request.read()
    async with asyncio.timeout(within_s):
        return await request.read()


def _bearer(header: str) -> str:
    scheme, _, credentials = header.strip().partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" else ""


@web.middleware
async def internal_auth(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Bearer ``RESETGATE_INTERNAL_API_TOKEN`` on every /internal/ route (constant-time)."""
    if not request.path.startswith(INTERNAL_PREFIX):
        return await handler(request)
    header = request.headers.get("Authorization")
    if header is None:
        return json_error(
            401,
            "unauthorized",
            "send Authorization: Bearer <internal API token>",
            **{"WWW-Authenticate": _REALM},
        )
    expected = request.app[SETTINGS].internal_api_token.get_secret_value().encode()
    # surrogateescape: a non-UTF-8 byte in the header (aiohttp keeps it as a lone surrogate)
    # must compare as wrong, not raise UnicodeEncodeError and answer 500.
    offered = _bearer(header).encode("utf-8", "surrogateescape")
    if not hmac.compare_digest(offered, expected):
        return json_error(
            401,
            "unauthorized",
            "the bearer token is not valid",
            **{"WWW-Authenticate": _REALM + ', error="invalid_token"'},
        )
    return await handler(request)


# What a retry can fix, the first match answering 503: the errors, the code, what the caller
# is told, and the Retry-After (seconds).
_RETRYABLE: tuple[tuple[tuple[type[BaseException], ...], str, str, str], ...] = (
    (
        (DirectoryError,),
        "directory_unavailable",
        "the account directory did not answer; retry later",
        "5",
    ),
    (
        (NotReplicated,),
        "not_replicated",
        "the request was not confirmed by enough replicas; retry, it will not be duplicated",
        "1",
    ),
    (
        (ArchiveUnavailable,),
        "archive_unavailable",
        "Redis no longer holds this and the archive did not answer; retry later",
        "5",
    ),
    ((AdmissionConflict,), "busy", "the account changed during the request; retry", "1"),
    (
        (RedisError, *TRANSIENT_ERRORS, TimeoutError),
        "store_unavailable",
        "the operation store did not answer; retry later",
        "2",
    ),
)


def _unavailable(error: Exception) -> web.Response | None:
    """503 for what a retry can fix: the directory, the store, replication, a busy account."""
    for errors, code, message, retry_after in _RETRYABLE:
        if isinstance(error, errors):
            return json_error(503, code, message, **{"Retry-After": retry_after})
    return None


def _from_http_exception(error: web.HTTPException) -> web.Response:
    headers = {name: error.headers[name] for name in _KEPT_HEADERS if name in error.headers}
    message = error.reason or "request failed"
    if error.status == 404:
        message = "no such route or resource"
    return json_error(error.status, "http_error", message, **headers)


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiError as error:
        return json_error(error.status, error.error, error.message)
    except web.HTTPException as error:
        return _from_http_exception(error)
    except Exception as error:
        unavailable = _unavailable(error)
        resource = request.match_info.route.resource
        route = resource.canonical if resource is not None else "unmatched"
        if unavailable is not None:
            event(
                log,
                logging.WARNING,
                "dependency unavailable",
                route=route,
                error=type(error).__name__,
            )
            return unavailable
        event(log, logging.ERROR, "unhandled error", route=route, error=type(error).__name__)
        return json_error(500, "internal_error", "the request failed; it has been logged")

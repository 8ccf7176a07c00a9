"""The internal API for support agents and automation (Bearer token, see http.internal_auth)."""

from __future__ import annotations

from aiohttp import web

from services.admission.context import DIRECTORY, EVIDENCE, GATE, REDIS, SETTINGS, TOKEN_KEYS
from services.admission.http import read_body
from services.admission.schemas import CONSUME_TOKEN, RECOVERY_OPERATION
from services.admission.tokens import consume
from shared import clock, metrics, operation_views
from shared.archive import HISTORY, MAX_HISTORY
from shared.errors import ApiError
from shared.ids import valid_account_id, valid_operation_id
from shared.scripts.admission import ConsumeResult
from shared.service import json_response

DEFAULT_OLDEST = 20

# Why a token was refused, as (status, error code, message). 403: the token is not this
# operation's; 409: it was already used; 410: it can never work again.
REFUSED: dict[ConsumeResult, tuple[int, str, str]] = {
    ConsumeResult.MISSING: (404, "unknown_operation", "no such recovery operation"),
    ConsumeResult.INVALID: (403, "invalid_token", "the token does not belong to this operation"),
    ConsumeResult.USED: (409, "token_used", "the token has already been used"),
    ConsumeResult.EXPIRED: (410, "token_expired", "the token has expired; request a new reset"),
    ConsumeResult.SUPERSEDED: (
        410,
        "token_superseded",
        "a newer reset was requested; only its token works",
    ),
}


async def create_operation(request: web.Request) -> web.Response:
    """Admit for an account on behalf of an agent or a job: converge or create, never duplicate."""
    body = await read_body(request, RECOVERY_OPERATION)
    account = await request.app[DIRECTORY].get_account(body["account_id"])
    if account is None:
        raise ApiError(404, "unknown_account", "the directory has no account with this id")
    admission = await request.app[GATE].admit(
        account.account_id, body["entry_point"], body.get("actor", "")
    )
    metrics.admissions.labels(body["entry_point"], str(admission.result)).inc()
    return json_response(
        {
            "operation_id": admission.operation_id or None,
            "state": admission.state or None,
            "created": admission.created,
            "result": str(admission.result),
        },
        201 if admission.created else 200,
    )


async def get_operation(request: web.Request) -> web.Response:
    """Read where it lives: Redis, else the archive; ``source`` says which."""
    settings = request.app[SETTINGS]
    operation_id = request.match_info["operation_id"]
    found = None
    if valid_operation_id(operation_id):  # anything else is no key of ours (404, as documented)
        found = await request.app[EVIDENCE].operation(operation_id)
    if found is None:
        raise ApiError(404, "unknown_operation", "no such recovery operation")
    detail, source = found
    return json_response({**detail.view(settings.max_attempts), "source": source})


def _history_parameters(request: web.Request) -> tuple[int, int]:
    since, limit = request.query.get("since", "0"), request.query.get("limit", str(HISTORY))
    if not (since.isascii() and since.isdigit()):
        raise ApiError(422, "invalid_parameter", "'since' must be a time in milliseconds")
    if not (limit.isascii() and limit.isdigit()) or not 1 <= int(limit) <= MAX_HISTORY:
        raise ApiError(422, "invalid_parameter", f"'limit' must be from 1 to {MAX_HISTORY}")
    return int(since), int(limit)


async def account_history(request: web.Request) -> web.Response:
    """The account's operations created since ``since`` (ms), newest first: the one Redis
    holds and those the archive holds; each says where it was read, ``archive`` whether
    the archive was read (not_configured, unavailable: the list may be short)."""
    settings = request.app[SETTINGS]
    account_id = request.match_info["account_id"]
    since, limit = _history_parameters(request)
    if not valid_account_id(account_id):
        raise ApiError(404, "no_operation", "this account has no recovery operation on record")
    found, archive = await request.app[EVIDENCE].history(account_id, since, limit)
    views = [{**d.view(settings.max_attempts), "source": s} for d, s in found]
    return json_response({"operations": views, "count": len(views), "archive": archive})


async def get_account_operation(request: web.Request) -> web.Response:
    """The account's live operation, or its last one."""
    settings = request.app[SETTINGS]
    account_id = request.match_info["account_id"]
    operation_id = None
    if valid_account_id(account_id):
        operation_id = await operation_views.account_operation_id(
            request.app[REDIS], account_id, settings.partitions
        )
    found = None
    if operation_id is not None:
        found = await request.app[EVIDENCE].operation(operation_id)
    if found is None:
        raise ApiError(404, "no_operation", "this account has no recovery operation on record")
    detail, source = found
    return json_response({**detail.view(settings.max_attempts), "source": source})


def _oldest_parameter(request: web.Request) -> int:
    raw = request.query.get("oldest", str(DEFAULT_OLDEST))
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= operation_views.MAX_OLDEST:
        raise ApiError(
            422,
            "invalid_parameter",
            f"'oldest' must be an integer from 1 to {operation_views.MAX_OLDEST}",
        )
    return int(raw)


async def list_oldest(request: web.Request) -> web.Response:
    """One row per live operation, oldest first: what on-call reads during an incident."""
    settings = request.app[SETTINGS]
    limit = _oldest_parameter(request)
    rows = await operation_views.oldest_live(
        request.app[REDIS], settings.partitions, limit, settings.max_attempts, clock.now_ms()
    )
    return json_response({"operations": rows, "count": len(rows)})


async def consume_token(request: web.Request) -> web.Response:
    body = await read_body(request, CONSUME_TOKEN)
    app = request.app
    result, account_id = await consume(
        app[REDIS], app[TOKEN_KEYS], app[SETTINGS].partitions, body["operation_id"], body["token"]
    )
    if result is not ConsumeResult.CONSUMED:
        status, error, message = REFUSED[result]
        raise ApiError(status, error, message)
    return json_response(
        {"status": "consumed", "operation_id": body["operation_id"], "account_id": account_id}
    )


def add_routes(app: web.Application) -> None:
    app.router.add_post("/internal/v1/recovery-operations", create_operation)
    app.router.add_get("/internal/v1/recovery-operations", list_oldest)
    app.router.add_get("/internal/v1/recovery-operations/{operation_id}", get_operation)
    app.router.add_get(
        "/internal/v1/accounts/{account_id}/recovery-operation", get_account_operation
    )
    app.router.add_get("/internal/v1/accounts/{account_id}/recovery-operations", account_history)
    app.router.add_post("/internal/v1/reset-tokens/consume", consume_token)

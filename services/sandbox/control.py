"""Test-only routes under ``/_sandbox``: change faults at runtime, read stats and bodies.

They need no key: the sandbox listens on loopback and exists for tests and local runs.
"""

from __future__ import annotations

import logging

from aiohttp import web
from pydantic import ValidationError

from services.sandbox.logs import log
from services.sandbox.responses import SANDBOX, bad_request, error, json_response, read_json
from services.sandbox.store import JsonDict, Message, rfc3339

CONTROL_BODY_LIMIT = 64 * 1024


async def get_config(request: web.Request) -> web.Response:
    return json_response(request.app[SANDBOX].settings.public_view())


async def post_config(request: web.Request) -> web.Response:
    sandbox = request.app[SANDBOX]
    changes = await read_json(request, CONTROL_BODY_LIMIT)
    if isinstance(changes, web.Response):
        return changes
    if not isinstance(changes, dict):
        return bad_request("body must be a JSON object of settings to change")
    try:
        updated = sandbox.settings.updated(changes)
    except ValidationError as exc:
        details = "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
            for e in exc.errors(include_input=False, include_url=False)
        )
        return bad_request(details)
    except ValueError as exc:
        return bad_request(str(exc))
    sandbox.reconfigure(updated)
    log("sandbox.config.changed", logging.INFO, changed=sorted(changes))
    return json_response(updated.public_view())


async def post_reset(request: web.Request) -> web.Response:
    request.app[SANDBOX].reset()
    log("sandbox.reset")
    return json_response({"status": "reset"})


async def get_stats(request: web.Request) -> web.Response:
    sandbox = request.app[SANDBOX]
    store = sandbox.store
    body = sandbox.stats.snapshot(
        operation_id=request.query.get("operation_id"),
        key=request.query.get("idempotency_key"),
    )
    store.materialize()
    body.update(
        messages_stored=len(store.messages),
        messages_evicted=store.evicted_messages,
        events_stored=store.events_stored,
        events_evicted=store.evicted_events,
        events_pending=store.pending_events,
        in_flight=len(store.in_flight),
        loop_stalls_total=sandbox.stalls.stalls,
        longest_stall_ms=round(sandbox.stalls.longest * 1000, 1),
        stalled_ms_total=round(sandbox.stalls.late * 1000),
    )
    return json_response(body)


def _full(message: Message) -> JsonDict:
    return {
        "id": message.id,
        "idempotency_key": message.idempotency_key,
        "operation_id": message.operation_id,
        "created_at": rfc3339(message.created_at),
        "status": message.status,
        "email": message.body,
    }


async def get_message_body(request: web.Request) -> web.Response:
    message = request.app[SANDBOX].store.get(request.match_info["message_id"])
    if message is None:
        return error(404, "not_found", "no such message (never sent, or evicted)")
    return json_response(_full(message))


async def list_message_bodies(request: web.Request) -> web.Response:
    """Every stored email of one operation or key (a scan: for tests, not for storms)."""
    operation_id = request.query.get("operation_id")
    key = request.query.get("idempotency_key")
    if operation_id is None and key is None:
        return bad_request("give operation_id or idempotency_key; every email: /_sandbox/inbox")
    found = [
        _full(m)
        for m in request.app[SANDBOX].store.messages.values()
        if (operation_id is None or m.operation_id == operation_id)
        and (key is None or m.idempotency_key == key)
    ]
    return json_response({"data": found})


def add_routes(app: web.Application) -> None:
    app.router.add_get("/_sandbox/config", get_config)
    app.router.add_post("/_sandbox/config", post_config)
    app.router.add_post("/_sandbox/reset", post_reset)
    app.router.add_get("/_sandbox/stats", get_stats)
    app.router.add_get("/_sandbox/messages", list_message_bodies)
    app.router.add_get("/_sandbox/messages/{message_id}", get_message_body)

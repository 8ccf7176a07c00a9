"""The provider contract routes (``docs/provider-contract.md``): send, lookup, events."""

from __future__ import annotations

import asyncio
import hmac
import logging
import secrets
import time
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import orjson
from aiohttp import web

from services.sandbox.logs import log
from services.sandbox.ratelimit import TokenBucket
from services.sandbox.responses import (
    SANDBOX,
    bad_request,
    error,
    json_response,
    non_negative_int,
    read_json,
)
from services.sandbox.state import Sandbox
from services.sandbox.store import EventPlan, JsonDict, Message

MAX_RECIPIENTS = 50
MAX_KEY_LENGTH = 256
MAX_PAGE = 1000
DEFAULT_PAGE = 100


# -- guards shared by every provider route -------------------------------------------
def check_auth(request: web.Request, sandbox: Sandbox) -> web.Response | None:
    given = request.headers.get("Authorization", "")
    if not hmac.compare_digest(given.encode(), sandbox.auth_header.encode()):
        sandbox.stats.count("auth")
        return error(401, "unauthorized", "missing or invalid bearer key")
    revoked = sandbox.settings.revoked_status
    if revoked:
        sandbox.stats.count("auth")
        return error(revoked, "credentials_revoked", "this API key has been revoked")
    return None


def throttle(sandbox: Sandbox, bucket: TokenBucket, counter: str) -> web.Response | None:
    wait = bucket.take()
    if wait <= 0.0:
        return None
    sandbox.count_throttled(counter)
    headers = sandbox.retry_after.header(wait)
    return error(429, "rate_limited", "too many requests", headers)


# -- send ---------------------------------------------------------------------------
def _recipient_problem(to: Any) -> str | None:
    if not isinstance(to, list) or not to:
        return '"to" must be a non-empty list of addresses'
    if len(to) > MAX_RECIPIENTS:
        return f'"to" holds at most {MAX_RECIPIENTS} addresses'
    if not all(isinstance(a, str) and "@" in a for a in to):
        return '"to" entries must be email addresses'
    return None


def send_body_problem(body: Any) -> str | None:
    """Why the send body breaks the contract, or None."""
    if not isinstance(body, dict):
        return "body must be a JSON object"
    problem = _recipient_problem(body.get("to"))
    if problem is not None:
        return problem
    for name in ("from", "subject", "text", "html"):
        if name in body and not isinstance(body[name], str):
            return f'"{name}" must be a string'
    if "tags" in body and not isinstance(body["tags"], dict):
        return '"tags" must be an object'
    return None


def domains(body: JsonDict) -> set[str]:
    return {str(a).rpartition("@")[2].strip(" >").lower() for a in body["to"]}


def key_problem(key: str | None) -> str | None:
    if key is not None and not 0 < len(key) <= MAX_KEY_LENGTH:
        return f"Idempotency-Key must be 1..{MAX_KEY_LENGTH} characters"
    return None


async def send(request: web.Request) -> web.Response:
    sandbox = request.app[SANDBOX]
    refused = check_auth(request, sandbox) or throttle(
        sandbox, sandbox.send_bucket, "send_throttled"
    )
    if refused is not None:
        return refused
    body = await read_json(request, sandbox.settings.max_body_bytes)
    if isinstance(body, web.Response):
        sandbox.stats.count("bad_request")
        return body
    key = request.headers.get("Idempotency-Key")
    problem = send_body_problem(body) or key_problem(key)
    if problem is not None:
        sandbox.stats.count("bad_request")
        return bad_request(problem)
    return await _send_valid(request, sandbox, body, key)


async def _send_valid(
    request: web.Request, sandbox: Sandbox, body: JsonDict, key: str | None
) -> web.Response:
    settings = sandbox.settings
    if sandbox.faults.error.fires(sandbox.faults.rng):
        sandbox.stats.count("error")
        log("sandbox.fault.error", logging.INFO, status=settings.error_status, idempotency_key=key)
        return error(settings.error_status, "provider_unavailable", "injected server error")
    if key is not None:
        earlier = sandbox.store.by_idempotency_key(key)
        if earlier is not None:
            return _replay(sandbox, earlier, body)
        if key in sandbox.store.in_flight:
            sandbox.stats.count("conflict")
            return error(409, "in_flight", "a request with this Idempotency-Key is in progress")
    if settings.reject_domain and settings.reject_domain in domains(body):
        sandbox.stats.count("rejected")
        return error(422, "recipient_rejected", "the recipient domain does not accept mail")
    return await _accept(request, sandbox, body, key)


def _replay(sandbox: Sandbox, earlier: Message, body: JsonDict) -> web.Response:
    sandbox.stats.count("replay")
    if earlier.fingerprint != fingerprint(body):
        # The same key with a different email: a client bug worth seeing (e.g. a new token).
        sandbox.stats.count("mismatch")
        differ = sorted(k for k in {*earlier.body, *body} if earlier.body.get(k) != body.get(k))
        log("sandbox.idempotency.mismatch", logging.WARNING, message_id=earlier.id, fields=differ)
    return web.Response(
        body=earlier.response,
        status=sandbox.settings.accepted_status,
        content_type="application/json",
        headers={"Idempotent-Replayed": "true"},
    )


async def _accept(
    request: web.Request,
    sandbox: Sandbox,
    body: JsonDict,
    key: str | None,
    respond: Callable[[Message], web.Response] | None = None,
    failed: Callable[[int], web.Response] | None = None,
) -> web.Response:
    """Record the email (slowly, if that fault fires) and answer, or drop the connection.
    ``respond`` shapes the accepted answer for a provider mode (default: this contract's);
    ``failed``: that mode's own error answer, for a late error in the provider's shape."""
    faults = sandbox.faults
    slow = faults.slow.fires(faults.rng)
    if key is not None:
        sandbox.store.in_flight.add(key)
    try:
        if slow:
            # The key stays in flight meanwhile, so a concurrent retry gets 409. A client that
            # times out does not cancel this handler: the email is still recorded (ambiguous).
            sandbox.stats.count("slow")
            await asyncio.sleep(sandbox.settings.slow_seconds)
        message = record(sandbox, body, key)
    finally:
        if key is not None:
            sandbox.store.in_flight.discard(key)
    if faults.drop.fires(faults.rng):
        return _drop(request, sandbox, message)
    if faults.late_error.fires(faults.rng):
        return _late_error(sandbox, message, failed)
    if respond is not None:
        return respond(message)
    return web.Response(
        body=message.response,
        status=sandbox.settings.accepted_status,
        content_type="application/json",
    )


accept = _accept


def _drop(request: web.Request, sandbox: Sandbox, message: Message) -> web.Response:
    """Accepted, then the connection dies before any answer: the client cannot know."""
    sandbox.stats.count("drop")
    log("sandbox.fault.drop", logging.INFO, message_id=message.id)
    if request.transport is not None:
        request.transport.abort()
    # Nothing reaches the client; aiohttp discards this on the closed transport.
    return web.Response(status=500)


def _late_error(
    sandbox: Sandbox, message: Message, failed: Callable[[int], web.Response] | None
) -> web.Response:
    """Accepted, then a gateway (a load balancer, a proxy) answers a 5xx page of its own, or
    (``late_error_shape`` "provider") the provider itself answers its documented error."""
    settings = sandbox.settings
    status = settings.late_error_status or settings.error_status
    sandbox.stats.count("late_error")
    log("sandbox.fault.late_error", logging.INFO, message_id=message.id, status=status)
    if settings.late_error_shape == "provider" and failed is not None:
        return failed(status)
    page = f"<html><body><h1>{status} {HTTPStatus(status).phrase}</h1></body></html>"
    return web.Response(status=status, text=page, content_type="text/html")


def fingerprint(body: JsonDict) -> int:
    return hash(orjson.dumps(body, option=orjson.OPT_SORT_KEYS))


def record(sandbox: Sandbox, body: JsonDict, key: str | None) -> Message:
    tags = body.get("tags") or {}
    operation_id = tags.get("operation_id")
    message_id = f"msg_{secrets.token_hex(10)}"
    message = Message(
        id=message_id,
        idempotency_key=key,
        operation_id=operation_id if isinstance(operation_id, str) else None,
        created_at=time.time(),
        created_mono=time.monotonic(),
        fingerprint=fingerprint(body),
        body=body,
        response=orjson.dumps({"id": message_id}),
    )
    sandbox.store.record(message)
    planned = sandbox.store.plan_events(message, _event_plan(sandbox, body))
    if sandbox.on_recorded is not None:
        sandbox.on_recorded(message, planned)
    sandbox.stats.email_sent(key, message.operation_id)
    return message


def _event_plan(sandbox: Sandbox, body: JsonDict) -> EventPlan:
    settings = sandbox.settings
    faults = sandbox.faults
    recipients = domains(body)
    bounced = bool(settings.bounce_domain) and settings.bounce_domain in recipients
    complained = bool(settings.complaint_domain) and settings.complaint_domain in recipients
    return EventPlan(
        final_type="bounced" if bounced else "delivered",
        complaint=complained and not bounced,
        delay=settings.delivered_delay_seconds,
        duplicate=faults.duplicate_event.fires(faults.rng),
        out_of_order=faults.out_of_order.fires(faults.rng),
    )


# -- polling ------------------------------------------------------------------------
def poll_guard(request: web.Request, sandbox: Sandbox) -> web.Response | None:
    refused = check_auth(request, sandbox) or throttle(
        sandbox, sandbox.poll_bucket, "poll_throttled"
    )
    if refused is not None:
        return refused
    if sandbox.faults.poll_error.fires(sandbox.faults.rng):
        sandbox.stats.count("poll_error")
        status = sandbox.settings.error_status
        return error(status, "provider_unavailable", "injected server error")
    return None


async def lookup_by_key(request: web.Request) -> web.Response:
    sandbox = request.app[SANDBOX]
    refused = poll_guard(request, sandbox)
    if refused is not None:
        return refused
    key = request.query.get("idempotency_key")
    if not key:
        return bad_request("query parameter idempotency_key is required")
    sandbox.store.materialize()
    message = sandbox.store.by_idempotency_key(key)
    return json_response({"data": [] if message is None else [message.summary()]})


async def message_detail(request: web.Request) -> web.Response:
    sandbox = request.app[SANDBOX]
    refused = poll_guard(request, sandbox)
    if refused is not None:
        return refused
    sandbox.store.materialize()
    message = sandbox.store.get(request.match_info["message_id"])
    if message is None:
        return error(404, "not_found", "no such message")
    return json_response(message.detail())


async def events(request: web.Request) -> web.Response:
    sandbox = request.app[SANDBOX]
    refused = poll_guard(request, sandbox)
    if refused is not None:
        return refused
    after = non_negative_int(request.query.get("after"), 0, "after", 2**62)
    limit = non_negative_int(request.query.get("limit"), DEFAULT_PAGE, "limit", MAX_PAGE)
    if isinstance(after, str) or isinstance(limit, str):
        return bad_request(after if isinstance(after, str) else str(limit))
    if limit == 0:
        return bad_request("limit must be at least 1")
    sandbox.store.materialize()
    if sandbox.store.beyond_end(after):
        # docs/provider-contract.md: a cursor past the feed's end is refused, never answered
        # with an empty page, or a poller that outlived a restart would wait forever.
        return error(
            410, "cursor_beyond_feed", "this feed never issued that cursor; start again without one"
        )
    page, cursor = sandbox.store.events_after(after, limit)
    return json_response({"data": [e.to_json() for e in page], "next": str(cursor)})


def add_routes(app: web.Application) -> None:
    app.router.add_post("/email/send", send)
    app.router.add_get("/email/messages", lookup_by_key)
    app.router.add_get("/email/messages/{message_id}", message_detail)
    app.router.add_get("/email/events", events)

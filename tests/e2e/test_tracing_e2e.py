"""One reset, one trace, on real processes (the sandbox, admission, a sender, the poller and
the router) exporting to a real OTLP/HTTP receiver (tests/support/otlp.py) at sampling 1.0:
the game's click, the admission and the first attempt share a trace; the sandbox throttles
that first attempt (its blackout: every send answers 429 with the remaining wait in
Retry-After, then the bucket decides), and the retry that is accepted starts a trace of its
own, linked to the admission (by the context its send job carries, the game's tracestate
kept with it). The sandbox's delivery event, read from its feed by the poller, is a span linked
to the admission too. A contact form about the same account continues the form system's
trace (its entry's traceparent) in the router, joins the admission's trace, and the support
case carries the routing's context on. No span, its resource included, names the player."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanProto
from redis.asyncio import Redis

from services.poller.traced import EVENT_TYPE, EVENTS
from services.sender.traced import OUTCOME, STATUS, TAKEN_OVER
from shared import tracing
from shared.directory import Account, RedisDirectory
from shared.keys import (
    CONTACT_FORMS,
    SUPPORT_CASES,
    TRACE_FIELD,
    PartitionKeys,
    partition_of,
)
from tests.e2e.conftest import (
    BASELINE,
    CLUSTER,
    POLLER_ENV,
    ROUTER_ENV,
    SENDER_ENV,
    poll,
    service_env,
)
from tests.support.otlp import OtlpReceiver, Span, personal
from tests.support.processes import Processes
from tests.support.sandbox import configure, run_sandbox_process

pytestmark = [
    pytest.mark.skipif(CLUSTER, reason="one stack of its own, on a single Redis"),
    # Five processes started and stopped around each test: on a machine at load 30 the
    # teardown alone outlasted the default 120 s once, the test itself having passed.
    pytest.mark.timeout(300),
]

GAME_TRACE = "5bf92f3577b34da6a3ce929d0e0e4737"
GAME_SPAN = "10f067aa0ba902b8"
GAME_STATE = "game=t61rcWkgMzE"  # the game's vendor entry: kept and passed on with the trace
FORM_TRACE, FORM_SPAN = "6cf92f3577b34da6a3ce929d0e0e4738", "20f067aa0ba902b9"
ACCOUNT = Account("acct-traced", "traced.player@example.com", "en")
LOGIN = "traced_login"
BLACKOUT_SECONDS = 1.0
TRACED = {"OTEL_TRACES_SAMPLER": "always_on", "OTEL_BSP_SCHEDULE_DELAY": "100"}
SERVER, CLIENT = SpanProto.SPAN_KIND_SERVER, SpanProto.SPAN_KIND_CLIENT
CONSUMER = SpanProto.SPAN_KIND_CONSUMER


@dataclass
class Traced:
    processes: Processes
    redis: Redis
    receiver: OtlpReceiver
    provider_url: str


@pytest.fixture
async def stack(redis_server: Any, redis: Redis) -> AsyncIterator[Traced]:
    logs = Path(tempfile.mkdtemp(prefix="rg-traces-"))
    sandbox = {**BASELINE, "send_blackout_seconds": BLACKOUT_SECONDS}
    async with OtlpReceiver() as receiver, run_sandbox_process(**sandbox) as provider_url:
        base = {
            **service_env(redis_server.url, provider_url),
            **TRACED,
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "RESETGATE_PUBLIC_RESPONSE_FLOOR_MS": "0",
        }
        async with Processes(logs, base) as processes:
            processes.add("admission")
            processes.add("sender", **SENDER_ENV)
            processes.add("router", **ROUTER_ENV)
            processes.add("poller", **POLLER_ENV)
            await asyncio.gather(*(processes.start(n) for n in processes.services))
            yield Traced(processes, redis, receiver, provider_url)


def where(spans: list[Span], name: str, **attributes: Any) -> list[Span]:
    return [
        s
        for s in spans
        if s.name == name and all(s.attributes.get(k) == v for k, v in attributes.items())
    ]


def with_parents(spans: list[Span], name: str, **attributes: Any) -> bool:
    """A span ``name`` has arrived, and so has its parent: a parent ends after its child, so
    the exporter may send it in a later batch."""
    ids = {s.span_id for s in spans}
    return any(s.parent_span_id in ids for s in where(spans, name, **attributes))


def accepted_and_delivered(spans: list[Span]) -> bool:
    delivered = {EVENT_TYPE: "delivered", tracing.RESULT: "applied"}
    return with_parents(spans, "provider call", **{OUTCOME: "accepted"}) and with_parents(
        spans, "delivery event", **delivered
    )


def children(spans: list[Span], parent: Span) -> list[Span]:
    return [s for s in spans if s.parent_span_id == parent.span_id]


async def test_one_reset_is_one_trace_and_its_retry_a_linked_one(stack: Traced) -> None:
    processes, redis, receiver = stack.processes, stack.redis, stack.receiver
    await RedisDirectory(redis).add(LOGIN, ACCOUNT)
    url = processes["admission"].url + "/v1/password-resets"
    headers = {"traceparent": f"00-{GAME_TRACE}-{GAME_SPAN}-01", "tracestate": GAME_STATE}
    async with (
        aiohttp.ClientSession() as http,
        http.post(url, json={"login": LOGIN}, headers=headers) as response,
    ):
        assert response.status == 202
    spans = await receiver.wait_for(accepted_and_delivered, timeout=60)

    keys = PartitionKeys(partition_of(ACCOUNT.account_id, 4))
    operation_id = await poll(lambda: redis.hget(keys.account(ACCOUNT.account_id), "last"))
    # The HTTP server span (the aiohttp instrumentation's) continues the game's trace.
    (served,) = where(spans, "POST /v1/password-resets")
    assert (served.trace_id, served.parent_span_id) == (GAME_TRACE, GAME_SPAN)
    assert served.kind == SERVER and served.attributes[STATUS] == 202
    (request,) = where(spans, "recovery request")
    (script,) = where(spans, "admit script")
    assert (request.trace_id, request.parent_span_id) == (GAME_TRACE, served.span_id)
    assert request.attributes[tracing.OPERATION_ID] == operation_id

    attempts = where(spans, "send attempt", **{tracing.OPERATION_ID: operation_id})
    first = [a for a in attempts if a.trace_id == GAME_TRACE]
    retries = [a for a in attempts if a.trace_id != GAME_TRACE]
    # The first attempt is the admission's child, and the sandbox throttled it.
    assert len(first) == 1 and first[0].parent_span_id == script.span_id
    assert first[0].trace_state == GAME_STATE
    assert first[0].attributes[tracing.PROVIDER] and tracing.PARTITION in first[0].attributes
    # Its claim off the send stream (read, not taken over from a quiet consumer) is its child.
    (claim,) = [s for s in where(spans, "claim") if s.parent_span_id == first[0].span_id]
    assert claim.attributes[TAKEN_OVER] is False
    (throttled,) = [
        s for s in where(spans, "provider call") if s.parent_span_id == first[0].span_id
    ]
    assert throttled.attributes[STATUS] == 429 and throttled.attributes[OUTCOME] == "throttled"
    # The HTTP client span (the aiohttp instrumentation's) is the provider call's child.
    (http_call,) = children(spans, throttled)
    assert http_call.kind == CLIENT and http_call.attributes[STATUS] == 429
    # Each retry is a trace of its own (no trace spans the backoff), linked to the admission
    # by the context its job carries (the link's tracestate too, but the SDK's exporter
    # sends no link's tracestate: tests/core/test_trace_context_in_entries.py checks the job).
    assert retries and all(not r.parent_span_id for r in retries)
    linked = (GAME_TRACE, script.span_id)
    assert all(r.links and r.links[0][:2] == linked for r in retries)
    (accepted,) = where(spans, "provider call", **{OUTCOME: "accepted"})
    assert accepted.trace_id in {r.trace_id for r in retries}

    # The delivery event the poller read is a span of its page's, linked to the admission.
    applied = {tracing.OPERATION_ID: operation_id, tracing.RESULT: "applied"}
    (delivered,) = where(spans, "delivery event", **applied, **{EVENT_TYPE: "delivered"})
    assert delivered.trace_id != GAME_TRACE
    assert delivered.links[0][:2] == linked
    (page,) = [s for s in where(spans, "delivery events") if s.span_id == delivered.parent_span_id]
    assert page.kind == CONSUMER and page.attributes[EVENTS] >= 1
    assert page.service == "resetgate-poller"
    # The feed's polls (every 0.2 s here) make no trace of their own.
    assert not [s for s in spans if s.service == page.service and s.kind == CLIENT]

    # The player writes in: the form's routing continues the form system's trace and joins
    # the operation's.
    form = {
        "event_id": "evt-traced",
        "topic": "password_reset",
        "login": LOGIN,
        "submitted_at": "2026-01-01T00:00:00Z",
        "message": "no email? " + ACCOUNT.email,
        TRACE_FIELD: f"00-{FORM_TRACE}-{FORM_SPAN}-01",
    }
    await redis.xadd(CONTACT_FORMS, form)  # type: ignore[arg-type]
    spans = await receiver.wait_for(
        lambda got: bool(where(got, "form routed")) and bool(where(got, "contact form"))
    )
    (joined,) = where(spans, "form routed")
    assert (joined.trace_id, joined.parent_span_id) == (GAME_TRACE, script.span_id)
    assert joined.attributes[tracing.OPERATION_ID] == operation_id
    assert joined.trace_state == GAME_STATE
    (routing,) = where(spans, "contact form")
    assert (routing.trace_id, routing.parent_span_id) == (FORM_TRACE, FORM_SPAN)
    assert joined.links[0][:2] == (routing.trace_id, routing.span_id)
    # The support case hands the form on with the routing's context.
    ((_, case),) = await redis.xrange(SUPPORT_CASES)
    assert case[TRACE_FIELD] == f"00-{FORM_TRACE}-{routing.span_id}-01"

    assert personal(spans, LOGIN, ACCOUNT.email) == []
    # Log lines name the span they were logged in: the trace leads to them and back.
    sender_lines = processes["sender"].log_records()
    finished = [line for line in sender_lines if line.get("msg") == "attempt finished"]
    first_ids = {s.span_id for s in spans if s.trace_id == GAME_TRACE}
    assert [
        line["span_id"] in first_ids for line in finished if line.get("trace_id") == GAME_TRACE
    ] == [True]


async def test_a_lookup_that_settles_an_ambiguous_attempt_is_linked_to_its_admission(
    stack: Traced,
) -> None:
    """The sandbox drops the connection after sending (an ambiguous attempt); the poller's
    lookup by idempotency key finds the message, and its span links to the admission."""
    processes, redis, receiver = stack.processes, stack.redis, stack.receiver
    await RedisDirectory(redis).add(LOGIN, ACCOUNT)
    await configure(stack.provider_url, drop_every=1)
    url = processes["admission"].url + "/v1/password-resets"
    async with aiohttp.ClientSession() as http, http.post(url, json={"login": LOGIN}) as answer:
        assert answer.status == 202
    ambiguous = {OUTCOME: "ambiguous"}
    await receiver.wait_for(lambda got: bool(where(got, "provider call", **ambiguous)), timeout=60)
    await configure(stack.provider_url, drop_every=0)
    keys = PartitionKeys(partition_of(ACCOUNT.account_id, 4))
    operation_id = str(await redis.hget(keys.account(ACCOUNT.account_id), "last"))
    kept = str(await redis.hget(keys.operation(operation_id), TRACE_FIELD))

    def found(got: list[Span]) -> bool:
        return bool(where(got, "provider lookup", **{tracing.RESULT: "found"}))

    spans = await receiver.wait_for(found, timeout=60)
    (lookup,) = where(spans, "provider lookup", **{tracing.RESULT: "found"})
    assert lookup.attributes[tracing.OPERATION_ID] == operation_id
    assert lookup.attributes[STATUS] == 200 and lookup.kind == CLIENT
    assert lookup.service == "resetgate-poller"
    assert lookup.links[0][:2] == (tracing.trace_id_of(kept), kept.split("-")[2])
    (http_lookup,) = children(spans, lookup)  # the opposite failure: a lookup is traced
    assert http_lookup.kind == CLIENT and http_lookup.attributes[STATUS] == 200
    assert personal(spans, LOGIN, ACCOUNT.email) == []

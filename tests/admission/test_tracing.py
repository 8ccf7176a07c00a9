"""Traces from a real admission process to a real OTLP/HTTP receiver (tests/support/otlp.py):
a recovery request continues the game's W3C trace, the admit script is its child, every span
names the operation and never the player; with no ``OTEL_*`` setting nothing is exported.
The reset page's link never reaches a span; Redis command spans come only on request."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import aiohttp
from redis.asyncio import Redis
from yarl import URL

from services.admission import resetpage
from shared import tracing
from shared.keys import TRACE_FIELD, PartitionKeys, partition_of
from tests.admission.helpers import ALICE, BOB, INTERNAL_TOKEN, seed_directory
from tests.conftest import TEST_TOKEN_KEYS
from tests.support.otlp import OtlpReceiver, Span, personal
from tests.support.processes import ServiceProcess

GAME_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
GAME_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{GAME_TRACE}-{GAME_SPAN}-01"
PARTITIONS = 4
ON = {"OTEL_TRACES_SAMPLER": "always_on", "OTEL_BSP_SCHEDULE_DELAY": "100"}


def admission(redis_url: str, log_dir: Path, **env: str) -> ServiceProcess:
    return ServiceProcess(
        "admission",
        {
            "RESETGATE_REDIS_URL": redis_url,
            "RESETGATE_TOKEN_KEYS": TEST_TOKEN_KEYS,
            "RESETGATE_INTERNAL_API_TOKEN": INTERNAL_TOKEN,
            "RESETGATE_PARTITIONS": str(PARTITIONS),
            "RESETGATE_SHUTDOWN_GRACE_SECONDS": "2",
            "RESETGATE_LOG_LEVEL": "DEBUG",
            "RESETGATE_PUBLIC_RESPONSE_FLOOR_MS": "0",
            **env,
        },
        log_dir,
    )


async def ask(process: ServiceProcess, login: str, **headers: str) -> None:
    async with aiohttp.ClientSession() as http:
        url = f"{process.url}/v1/password-resets"
        async with http.post(url, json={"login": login}, headers=headers) as response:
            assert response.status == 202, await response.text()


async def last_operation(redis: Redis, account_id: str) -> str:
    keys = PartitionKeys(partition_of(account_id, PARTITIONS))
    return str(await redis.hget(keys.account(account_id), "last"))


async def kept_traceparent(redis: Redis, account_id: str) -> str | None:
    """The traceparent the operation keeps, and the one its send job carries (the same)."""
    operation_id = await last_operation(redis, account_id)
    keys = PartitionKeys.of(operation_id)
    kept = await redis.hget(keys.operation(operation_id), TRACE_FIELD)
    ((_, fields),) = await redis.xrange(keys.send)
    assert fields.get(TRACE_FIELD) == kept
    return kept


def named(spans: list[Span], name: str) -> list[Span]:
    return [span for span in spans if span.name == name]


def lines(process: ServiceProcess) -> list[dict[str, Any]]:
    return process.log_records()


async def test_a_recovery_request_continues_the_games_trace_and_names_no_person(
    redis: Redis, redis_server: Any, tmp_path: Path
) -> None:
    await seed_directory(redis)
    async with OtlpReceiver() as receiver:
        process = admission(
            redis_server.url, tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, **ON
        )
        await process.start()
        try:
            await ask(process, ALICE[0], traceparent=TRACEPARENT)
            await ask(process, BOB[0], traceparent="00-not-a-trace-context")
            spans = await receiver.wait_for(lambda got: len(named(got, "admit script")) == 2)
        finally:
            await process.stop()
    alice, bob = sorted(named(spans, "recovery request"), key=lambda s: s.trace_id != GAME_TRACE)
    # The HTTP server span (the aiohttp instrumentation's) continues the game's trace.
    served = {s.trace_id: s for s in named(spans, "POST /v1/password-resets")}
    assert served[GAME_TRACE].parent_span_id == GAME_SPAN
    assert alice.parent_span_id == served[GAME_TRACE].span_id
    assert alice.service == "resetgate-admission"
    operation_id = await last_operation(redis, ALICE[1].account_id)
    assert alice.attributes[tracing.OPERATION_ID] == operation_id
    (script,) = [s for s in named(spans, "admit script") if s.trace_id == GAME_TRACE]
    assert script.parent_span_id == alice.span_id
    assert script.attributes[tracing.PARTITION] == partition_of(ALICE[1].account_id, PARTITIONS)
    # The operation and its send job keep the admit script's context: the sender's child.
    assert (
        await kept_traceparent(redis, ALICE[1].account_id) == f"00-{GAME_TRACE}-{script.span_id}-01"
    )
    # A context that does not parse starts a trace of our own; the request is served alike.
    assert bob.trace_id != GAME_TRACE and not served[bob.trace_id].parent_span_id
    logins_and_addresses = (ALICE[0], BOB[0], ALICE[1].email, BOB[1].email)
    assert personal(spans, *logins_and_addresses) == []
    traced = [line for line in lines(process) if line.get("msg") == "public admission"]
    assert {line.get("trace_id") for line in traced} == {GAME_TRACE, bob.trace_id}


async def test_with_no_otel_setting_no_provider_is_installed_and_logs_name_no_trace(
    redis: Redis, redis_server: Any, tmp_path: Path
) -> None:
    await seed_directory(redis)
    process = admission(redis_server.url, tmp_path, **ON)  # a sampler alone turns nothing on
    await process.start()
    try:
        await ask(process, ALICE[0], traceparent=TRACEPARENT)
    finally:
        await process.stop()
    assert await kept_traceparent(redis, ALICE[1].account_id) is None
    records = lines(process)
    assert [line for line in records if line.get("msg") == "public admission"]
    assert not [line for line in records if "trace_id" in line]
    assert not [line for line in records if line.get("msg") == tracing.INSTALLED]


def test_only_an_otlp_destination_turns_traces_on() -> None:
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}
    assert tracing.wanted(endpoint)
    assert tracing.wanted({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"})
    assert tracing.wanted({"OTEL_TRACES_EXPORTER": "otlp"})
    assert not tracing.wanted({})
    assert not tracing.wanted({"OTEL_TRACES_SAMPLER": "always_on", "OTEL_SERVICE_NAME": "x"})
    assert not tracing.wanted({**endpoint, "OTEL_TRACES_EXPORTER": "none"})
    assert not tracing.wanted({**endpoint, "OTEL_SDK_DISABLED": "true"})
    assert not tracing.wanted({**endpoint, "OTEL_TRACES_EXPORTER": "zipkin"})  # not built in


async def test_the_reset_pages_link_and_the_directorys_query_never_reach_a_span(
    redis: Redis, redis_server: Any, tmp_path: Path
) -> None:
    """The harm: the local reset page's query string is the reset link (its token), and an
    HTTP client span's URL would carry the directory's ``?login=``. The opposite failure:
    every other request still has its server span, and a client span keeps its URL's path."""
    await seed_directory(redis)
    async with OtlpReceiver() as receiver:
        process = admission(
            redis_server.url,
            tmp_path,
            RESETGATE_LOCAL_RESET_PAGE="true",
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
            **ON,
        )
        await process.start()
        try:
            link = f"{process.url}{resetpage.PATH}?operation=op-1-x&token={'t' * 43}"
            async with aiohttp.ClientSession() as http, http.get(link) as response:
                assert response.content_type == "text/html"  # the page: no such operation
            await ask(process, ALICE[0])  # after the page: its spans come once the page's would
            spans = await receiver.wait_for(lambda got: bool(named(got, "admit script")))
        finally:
            await process.stop()
    assert named(spans, "POST /v1/password-resets")
    assert not [
        s
        for s in spans
        if resetpage.PATH in s.name or s.attributes.get("url.path") == resetpage.PATH
    ]
    assert personal(spans, ALICE[0], ALICE[1].email, "t" * 43) == []
    login_url = URL("http://user:secret@directory.example/accounts/lookup?login=" + ALICE[0])
    assert tracing.without_query(login_url) == "http://directory.example/accounts/lookup"


def test_the_operational_probes_get_no_server_span() -> None:
    untraced = re.compile("|".join(tracing.UNTRACED_PATHS))
    assert all(untraced.search(path) for path in ("/healthz", "/readyz", "/metrics"))
    assert not untraced.search("/v1/password-resets")
    assert not untraced.search("/console/operations/op-1-x")


async def test_redis_command_spans_come_only_on_request_and_name_no_argument(
    redis: Redis, redis_server: Any, tmp_path: Path
) -> None:
    await seed_directory(redis)
    async with OtlpReceiver() as receiver:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, **ON}
        quiet = admission(redis_server.url, tmp_path / "quiet", **env)
        await quiet.start()
        try:
            await ask(quiet, ALICE[0])
            spans = await receiver.wait_for(lambda got: bool(named(got, "admit script")))
        finally:
            await quiet.stop()
        assert not [
            s for s in spans if "db.system" in s.attributes or "db.system.name" in s.attributes
        ]
        asked = admission(
            redis_server.url, tmp_path / "asked", RESETGATE_TRACE_REDIS_COMMANDS="true", **env
        )
        await asked.start()
        try:
            await ask(asked, BOB[0])
            spans = await receiver.wait_for(lambda got: len(named(got, "admit script")) == 2)
        finally:
            await asked.stop()
    commands = [s for s in spans if "db.statement" in s.attributes]
    assert commands, "no Redis command span"
    # Each names its command and hides every argument: "EVALSHA ? ? ?".
    for command in commands:
        name, *arguments = str(command.attributes["db.statement"]).split(" ")
        assert name == command.name and set(arguments) <= {"?"}
    assert personal(spans, ALICE[0], BOB[0], ALICE[1].email, BOB[1].email) == []

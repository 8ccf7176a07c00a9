"""Invariant 8 after a full run on real processes: no email address, reset token, reset URL
or configured secret in any log line of any service, any /metrics page, or any Redis key.

The run: the sandbox provider (429s with Retry-After, 503s, accepted-then-dropped sends,
duplicated and out-of-order events, bounces, complaints, rejections), admission (public
endpoint with logins that are addresses, resend clicks, unknown logins, malformed bodies, a
flood into the IP limit; internal API: agent and automation admissions, reads, token use),
sender, poller (delivery events, reconciliation of dropped sends) and router (contact forms,
free text, garbage), every service logging at DEBUG. Then, once every operation is settled:

- every log line of admission, sender, poller and router (the sandbox plays the email
  provider, which must see addresses: it is not scanned);
- every service's /metrics page;
- every Redis key, whatever its type (strings, hashes, lists, sets, sorted sets, streams with
  their groups and consumers), both as read and as its ``DUMP`` (what RDB, AOF rewrites and
  replicas get, deleted stream entries whose node lives on included), except the directory
  stand-in under ``rgdir:`` - the studio's account directory, where addresses belong;

are searched for any address, any 43-character base64url run, any URL or reset link, and,
literally, for every token this run's operations could have (derived with shared.tokens for
every operation id and key id), every address and login, and the internal bearer, token keys
and provider key."""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import aiohttp
from redis.asyncio import Redis

from services.ctl.embedded import RedisServer
from shared.control import pause_partitions, resume_partitions
from shared.directory import Account, RedisDirectory
from shared.keys import CONTACT_FORMS, PartitionKeys, directory_login
from shared.tokens import parse_keys
from tests.conftest import TEST_TOKEN_KEYS
from tests.e2e.conftest import POLLER_ENV, ROUTER_ENV, SENDER_ENV
from tests.security.conftest import BEARER, INTERNAL_TOKEN, Exchange, base_env
from tests.security.scan import Finding, metric_data, redis_contents, scan, uncompressed_dumps
from tests.support.keys import ANY_PARTITION
from tests.support.processes import Processes
from tests.support.sandbox import SANDBOX_API_KEY, run_sandbox_process, sent_emails

SANDBOX: dict[str, Any] = {
    "delivered_delay_seconds": 0.3,
    "send_rate_per_second": 40,
    "send_burst": 5,
    "error_every": 9,
    "drop_every": 11,
    "duplicate_event_every": 5,
    "out_of_order_every": 7,
    "bounce_domain": "bounce.example",
    "complaint_domain": "complaint.example",
    "reject_domain": "reject.example",
    "seed": 7,
}
DOMAINS = (
    ["example.org"] * 24
    + ["bounce.example"] * 3
    + ["complaint.example"] * 2
    + ["reject.example"] * 2
)
FAKE_LINK = "https://game.example/reset-password?operation=op-1-01M8KVZDNBE35GX41B1GG54MAF&token="
FAKE_TOKEN = "A" * 20 + "_" + "b" * 22  # 43 base64url characters, as a player might paste one


async def test_invariant_8_nothing_secret_in_logs_metrics_or_redis(
    redis: Redis, redis_server: RedisServer, tmp_path: Path
) -> None:
    accounts = await directory(redis)
    # Held until the first scan, so that it sees operations queued (live sets, send jobs).
    await pause_partitions(redis, list(range(4)), "security scan: hold until first look")
    env = base_env(
        redis_server.url,
        RESETGATE_IP_LIMIT_PER_MINUTE="120",
        RESETGATE_IP_LIMIT_BURST="20",
        RESETGATE_TRUSTED_PROXY_HOPS="1",
        RESETGATE_OBSERVATION_WINDOW_SECONDS="5",
    )
    async with run_sandbox_process(**SANDBOX) as provider_url:
        env.update(RESETGATE_PROVIDER_URL=provider_url, RESETGATE_PROVIDER_API_KEY=SANDBOX_API_KEY)
        async with Processes(tmp_path / "logs", env) as stack:
            stack.add("admission")
            stack.add("sender", **SENDER_ENV)
            stack.add("poller", **POLLER_ENV)
            stack.add("router", **ROUTER_ENV)
            await asyncio.gather(*(stack.start(name) for name in stack.services))
            url = stack["admission"].url
            await drive_public(url, accounts)
            queued = {op: {} for op in await operation_ids(redis)}
            in_flight = await redis_findings(
                redis_server.url, literals(accounts, derived_tokens(queued))
            )
            await resume_partitions(redis, list(range(4)))
            await drive_contact_forms(redis, redis_server.url, accounts)
            await drive_hostile(stack["admission"].port)
            operations = await settled(redis, len(accounts))
            await drive_internal(url, accounts, operations)
            tokens = derived_tokens(operations)
            await check_tokens_were_really_sent(provider_url, operations, tokens)
            findings, looked_at, kinds = await look_everywhere(
                redis_server, stack, accounts, tokens
            )
            findings += in_flight[0]
            assert all(service.running for service in stack.services.values())
    print(
        f"scanned {looked_at}; in flight {in_flight[1]}; {len(operations)} operations, "
        f"{len(tokens)} tokens looked for"
    )
    assert {"string", "hash", "list", "zset", "stream"} <= set(kinds + in_flight[1])
    assert not findings, "\n".join(str(f) for f in findings[:30])


async def directory(redis: Redis) -> list[tuple[str, str, str]]:
    """(login, account id, address): logins are addresses, as they often are."""
    made = []
    for i, domain in enumerate(DOMAINS):
        login, account_id = f"p{i}.player@example.com", f"acct-rest-{i}"
        address = f"p{i}.mail@{domain}"
        await RedisDirectory(redis).add(login, Account(account_id, address))
        made.append((login, account_id, address))
    return made


async def post(session: aiohttp.ClientSession, url: str, client: str, **kwargs: Any) -> int:
    headers = {"X-Forwarded-For": client, **kwargs.pop("headers", {})}
    async with session.post(url + "/v1/password-resets", headers=headers, **kwargs) as reply:
        await reply.read()
        return reply.status


async def drive_public(url: str, accounts: list[tuple[str, str, str]]) -> None:
    async with aiohttp.ClientSession() as session:
        for i, (login, _, _) in enumerate(accounts):
            client = f"198.51.100.{i + 1}"
            assert await post(session, url, client, json={"login": login}) == 202
            if i % 3 == 0:  # resend clicks
                assert await post(session, url, client, json={"login": login.upper()}) == 202
            assert await post(session, url, client, json={"login": f"x{i}@nowhere.example"}) == 202
        odd = [
            b'{"login": "broken@example.com"',
            b'{"alice@example.com": 1}',
            b'{"login": "' + b"z" * 300 + b'@example.com"}',
        ]
        for body in odd:
            headers = {"Content-Type": "application/json"}
            assert await post(session, url, "192.0.2.9", data=body, headers=headers) in (400, 422)
        statuses = [
            await post(session, url, "192.0.2.10", json={"login": login})
            for login, _, _ in accounts
        ]
        assert 429 in statuses  # the flood reached the limit (its keys are scanned too)


async def drive_contact_forms(
    redis: Redis, redis_url: str, accounts: list[tuple[str, str, str]]
) -> None:
    free_text = f"I am {accounts[0][2]}, my link {FAKE_LINK}{FAKE_TOKEN} does not work"
    forms: list[dict[Any, Any]] = []
    for i, (login, account_id, _) in enumerate(accounts[:8]):
        who = {"login": login} if i % 2 else {"account_id": account_id}
        forms.append(
            {"event_id": f"evt-rest-{i}", "topic": "password_reset", **who, "message": free_text}
        )
    forms += [
        {
            "event_id": "evt-rest-unknown",
            "topic": "login_problem",
            "login": "ghost@example.com",
            "message": free_text,
        },
        {
            "event_id": "evt-rest-general",
            "topic": "billing",
            "account_id": accounts[1][2],
            "message": free_text,
        },
        {"event_id": accounts[2][2], "topic": "password_reset", "login": accounts[2][0]},
        {"event_id": "evt-rest-topic", "topic": free_text, "login": accounts[3][0]},
        {
            "event_id": "evt-rest-binary",
            "topic": "password_reset",
            "login": accounts[4][0].encode() + b"\xff",
        },
        {
            "event_id": "evt-rest-time",
            "topic": "password_reset",
            "login": accounts[5][0],
            "submitted_at": free_text,
        },
        {"event_id": "evt-rest-name", free_text: "1"},
    ]
    raw = Redis.from_url(redis_url)  # bytes as given: one form is not UTF-8
    try:
        for form in forms:
            await raw.xadd(CONTACT_FORMS, form)
    finally:
        await raw.aclose()
    async with asyncio.timeout(30):
        while True:
            groups = await redis.xinfo_groups(CONTACT_FORMS)
            if groups and int(groups[0]["pending"]) == 0 and int(groups[0]["lag"] or 0) == 0:
                return
            await asyncio.sleep(0.1)


async def drive_hostile(port: int) -> None:
    """Requests aiohttp itself refuses, carrying the bearer and an address."""
    exchange = Exchange(port)
    head = b"GET /internal/v1/recovery-operations HTTP/1.1\r\nHost: rg\r\n"
    bearer = b"Authorization: Bearer " + INTERNAL_TOKEN.encode()
    await exchange.send(head + bearer + b"\x01\r\n\r\n")
    await exchange.send(head + b"X-Login: someone@example.com\x7f\r\n\r\n")
    await exchange.send(b"GET /?login=someone@example.com&p=" + b"p" * 9000 + b" HTTP/1.1\r\n\r\n")


async def settled(redis: Redis, accounts: int, timeout: float = 90) -> dict[str, dict[str, str]]:
    """Every operation's hash once each is final: terminal, and if accepted, its delivery
    observed or its observation window closed."""
    async with asyncio.timeout(timeout):
        while True:
            operations = {}
            for operation_id in await operation_ids(redis):
                key = PartitionKeys.of(operation_id).operation(operation_id)
                operations[operation_id] = await redis.hgetall(key)
            if len(operations) == accounts and all(map(final, operations.values())):
                return operations
            await asyncio.sleep(0.25)


def final(operation: dict[str, str]) -> bool:
    if operation.get("state") in ("failed", "exhausted", "expired"):
        return True
    observed = operation.get("delivery", "unknown") != "unknown"
    return operation.get("state") == "accepted" and (
        observed or bool(operation.get("observation_closed_at"))
    )


async def drive_internal(
    url: str, accounts: list[tuple[str, str, str]], operations: dict[str, dict[str, str]]
) -> None:
    keys = parse_keys(TEST_TOKEN_KEYS)
    async with aiohttp.ClientSession(headers=BEARER) as session:

        async def call(method: str, path: str, **kwargs: Any) -> int:
            async with session.request(method, url + path, **kwargs) as reply:
                await reply.read()
                return reply.status

        for i, (_, account_id, _) in enumerate(accounts[:6]):
            body = {
                "account_id": account_id,
                "entry_point": ["agent", "automation"][i % 2],
                "actor": f"agent:{i}",
            }
            assert await call("POST", "/internal/v1/recovery-operations", json=body) in (200, 201)
            path = f"/internal/v1/accounts/{account_id}/recovery-operation"
            assert await call("GET", path) == 200
        assert await call("GET", "/internal/v1/recovery-operations?oldest=100") == 200
        ids = sorted(operations)
        for operation_id in ids:
            assert await call("GET", f"/internal/v1/recovery-operations/{operation_id}") == 200
        consume = "/internal/v1/reset-tokens/consume"
        for operation_id in ids[:4]:
            token = keys.derive(operation_id, operations[operation_id]["token_kid"])
            body = {"operation_id": operation_id, "token": token}
            assert await call("POST", consume, json=body) in (200, 410)
            assert await call("POST", consume, json=body) in (409, 410)
        wrong = {"operation_id": ids[5], "token": keys.derive(ids[6])}
        assert await call("POST", consume, json=wrong) == 403


def derived_tokens(operations: dict[str, dict[str, str]]) -> set[str]:
    """Every token any operation of this run could carry, under every key id."""
    keys = parse_keys(TEST_TOKEN_KEYS)
    return {keys.derive(op, kid) for op in operations for kid in keys.secrets}


async def check_tokens_were_really_sent(
    provider_url: str, operations: dict[str, dict[str, str]], tokens: set[str]
) -> None:
    """The search is not vacuous: the provider received exactly these tokens, in links."""
    sent = 0
    for operation_id, operation in operations.items():
        if operation["state"] != "accepted":
            continue
        for email in await sent_emails(provider_url, operation_id=operation_id):
            match = re.search(r"token=([A-Za-z0-9_\-]{43})", email["email"]["text"])
            assert match is not None and match.group(1) in tokens
            sent += 1
    assert sent >= len(DOMAINS) - 2  # all but the rejected addresses


def literals(accounts: list[tuple[str, str, str]], tokens: set[str]) -> dict[str, set[str]]:
    """What is searched for literally: tokens, addresses and logins, configured secrets."""
    keys = parse_keys(TEST_TOKEN_KEYS)
    return {
        "token": tokens,
        "address or login": {value for login, _, email in accounts for value in (login, email)},
        "secret": {INTERNAL_TOKEN, SANDBOX_API_KEY, *(s.decode() for s in keys.secrets.values())},
    }


async def operation_ids(redis: Redis) -> list[str]:
    return [
        key.rsplit(":", 1)[1]
        async for key in redis.scan_iter(ANY_PARTITION.operation("*"))
        if not key.endswith(":attempts")
    ]


async def look_everywhere(
    redis_server: RedisServer,
    stack: Processes,
    accounts: list[tuple[str, str, str]],
    tokens: set[str],
) -> tuple[list[Finding], str, Counter[str]]:
    looked_for = literals(accounts, tokens)
    findings: list[Finding] = []
    lines = 0
    for service in stack.services.values():
        text = service.logs()
        lines += text.count("\n")
        findings += scan(f"{service.name} log", text, looked_for)
        page = await service.metrics_text()
        findings += scan(f"{service.name} /metrics", page, looked_for, metric_data(page))
    in_redis, kinds = await redis_findings(redis_server.url, looked_for)
    names = ", ".join(stack.services)
    looked_at = (
        f"{lines} log lines and {len(stack.services)} /metrics pages of {names}; "
        f"{kinds.total()} Redis keys {dict(kinds)}"
    )
    return findings + in_redis, looked_at, kinds


async def redis_findings(
    url: str, literals: dict[str, Iterable[str]]
) -> tuple[list[Finding], Counter[str]]:
    """Findings in every key (but the directory's), and how many keys of each type."""
    raw = Redis.from_url(url)  # undecoded: binary content is scanned as it is
    findings: list[Finding] = []
    kinds: Counter[str] = Counter()
    try:
        async with uncompressed_dumps(raw):
            async for key, content in redis_contents(raw):
                kinds[content.split(" ", 1)[0]] += 1
                findings += scan(f"redis {key}", key + " " + content, literals)
    finally:
        await raw.aclose()
    return findings, kinds


async def test_the_scan_finds_what_it_looks_for_in_every_type(
    redis: Redis, redis_server: RedisServer
) -> None:
    """The scanner itself: something planted in each Redis type is found; rgdir: is not read."""
    token = parse_keys(TEST_TOKEN_KEYS).derive("op-1-01M8KVZDNBE35GX41B1GG54MAF")
    await redis.set("plant:string", "to someone@example.com")
    await redis.hset("plant:hash", mapping={"link": FAKE_LINK + "x"})
    await redis.rpush("plant:list", "a", token)
    await redis.sadd("plant:set", "x", "z" * 43)
    await redis.zadd("plant:zset", {"another@example.net": 1.0})
    await redis.xadd("plant:stream", {"note": f"reset?token={token}"})
    await redis.xgroup_create("plant:stream", "g", id="0")
    await redis.xreadgroup("g", "consumer-me@example.org", {"plant:stream": ">"})
    # Deleted, but its node lives on with a neighbour: no read shows it, DUMP does.
    gone = await redis.xadd("plant:deleted", {"note": "deleted@example.com"})
    await redis.xadd("plant:deleted", {"note": "kept"})
    await redis.xdel("plant:deleted", gone)
    await redis.set(directory_login("x"), "directory@example.com")
    findings, kinds = await redis_findings(redis_server.url, {"token": {token}})
    found = {(f.where, f.what) for f in findings}
    assert found == {
        ("redis plant:string", "address"),
        ("redis plant:hash", "url"),
        ("redis plant:list", "token-shaped"),
        ("redis plant:list", "token"),
        ("redis plant:set", "token-shaped"),
        ("redis plant:zset", "address"),
        ("redis plant:stream", "url"),
        ("redis plant:stream", "token-shaped"),
        ("redis plant:stream", "token"),
        ("redis plant:stream", "address"),  # the consumer's name
        ("redis plant:deleted", "address"),  # in DUMP only
    }, found
    assert set(kinds) == {"string", "hash", "list", "set", "zset", "stream"}

"""The per-client-IP limit under a flood, on the real admission process behind one trusted
proxy (RESETGATE_TRUSTED_PROXY_HOPS=1, X-Forwarded-For): one client gets at most its budget
(burst + rate x elapsed) whatever it puts left of the proxy's entry, every refusal is the
same 429 body with Retry-After whether the login exists or not, other clients are unaffected,
addresses rotated inside one IPv6 /64 or garbage in the header share one bucket, and the
limiter keeps one small key per bucket, not per request."""

from __future__ import annotations

import asyncio
import itertools
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator

import aiohttp
from multidict import CIMultiDict
from redis.asyncio import Redis

from shared.keys import IP_LIMIT_PREFIX
from tests.security.conftest import add_accounts
from tests.support.keys import ANY_PARTITION
from tests.support.processes import Processes, ServiceProcess

PER_MINUTE = 60  # one request a second sustained
BURST = 10
FLOOD_SECONDS = 3.0
LIMIT_ENV = {
    "RESETGATE_IP_LIMIT_PER_MINUTE": str(PER_MINUTE),
    "RESETGATE_IP_LIMIT_BURST": str(BURST),
    "RESETGATE_TRUSTED_PROXY_HOPS": "1",
}


def budget(elapsed: float) -> int:
    """The most GCRA may admit in ``elapsed`` seconds from a fresh bucket."""
    return BURST + math.ceil(elapsed * PER_MINUTE / 60)


async def flood(
    url: str, forwarded: Iterable[str], logins: list[str], concurrency: int = 16
) -> tuple[list[tuple[int, str, bytes, str | None]], float]:
    """One request per X-Forwarded-For value; (status, login, body, Retry-After) each."""
    results: list[tuple[int, str, bytes, str | None]] = []
    pending = iter(zip(forwarded, itertools.cycle(logins), strict=False))
    started = time.monotonic()

    async def worker(session: aiohttp.ClientSession) -> None:
        for xff, login in pending:
            headers = {"X-Forwarded-For": xff}
            async with session.post(
                url + "/v1/password-resets", json={"login": login}, headers=headers
            ) as reply:
                body = await reply.read()
                results.append((reply.status, login, body, reply.headers.get("Retry-After")))

    async with aiohttp.ClientSession() as session:
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
    return results, time.monotonic() - started


def for_seconds(seconds: float, value: Callable[[], str]) -> Iterator[str]:
    """``value()`` over and over until ``seconds`` have passed."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        yield value()


def spoofed(client: str) -> str:
    """What a client sends (any left part it likes) plus what our proxy appended."""
    junk = random.choice(["", "10.0.0.1, ", "1.2.3.4, 5.6.7.8, ", "unknown, ", "::1, "])
    return f"{junk}{client}"


async def test_one_client_flooding_gets_its_budget_and_nothing_reveals_the_account(
    redis: Redis, stack: Processes
) -> None:
    accounts = await add_accounts(redis, 5)
    admission = await stack.start("admission", **LIMIT_ENV)
    logins = [login for login, _ in accounts] + [f"nobody{i}@example.com" for i in range(5)]
    attacker = "198.51.100.7"
    others = [f"203.0.113.{i}" for i in range(1, 6)]

    flooding = asyncio.create_task(
        flood(admission.url, for_seconds(FLOOD_SECONDS, lambda: spoofed(attacker)), logins)
    )
    await asyncio.sleep(FLOOD_SECONDS / 2)  # in the middle of the flood
    bystanders, _ = await flood(admission.url, [c for c in others for _ in range(5)], logins, 5)
    results, elapsed = await flooding

    statuses = Counter(status for status, *_ in results)
    limited = [r for r in results if r[0] == 429]
    print(
        f"flood: {len(results)} requests from one client in {elapsed:.2f} s -> "
        f"{statuses[202]} admitted (budget {budget(elapsed)}), {statuses[429]} x 429; "
        f"{len(bystanders)} requests from 5 other clients meanwhile: "
        f"{Counter(s for s, *_ in bystanders)}"
    )
    assert set(statuses) == {202, 429}
    assert BURST <= statuses[202] <= budget(elapsed)
    assert len({body for _, _, body, _ in limited}) == 1  # one body for every login
    assert {login for _, login, _, _ in limited} == set(logins)
    assert all(ra is not None and ra.isdigit() and int(ra) >= 1 for *_, ra in limited)
    assert {status for status, *_ in bystanders} == {202}
    assert await _ops_created(redis) <= statuses[202]
    assert len([k async for k in redis.scan_iter(IP_LIMIT_PREFIX + "*")]) <= 1 + len(others)


async def test_rotating_inside_one_ipv6_64_or_sending_garbage_does_not_buy_a_bigger_budget(
    redis: Redis, stack: Processes
) -> None:
    admission = await stack.start("admission", **LIMIT_ENV)
    rotating = [f"2001:db8:1:2:{random.randrange(65536):x}::{i:x}" for i in range(150)]
    garbage = [
        random.choice(["not-an-ip", "999.1.1.1", "::::", "[", "1.2.3", "a, b"]) for _ in range(150)
    ]
    for forwarded in (rotating, garbage):
        results, elapsed = await flood(admission.url, forwarded, ["someone@example.com"])
        admitted = sum(1 for status, *_ in results if status == 202)
        print(f"{len(forwarded)} requests in {elapsed:.2f} s -> {admitted} admitted")
        assert admitted <= budget(elapsed)
    keys = sorted([k async for k in redis.scan_iter(IP_LIMIT_PREFIX + "*")])
    assert keys == [IP_LIMIT_PREFIX + "2001:db8:1:2::/64", IP_LIMIT_PREFIX + "invalid"], keys


async def _ops_created(redis: Redis) -> int:
    return sum([await redis.zcard(key) async for key in redis.scan_iter(ANY_PARTITION.live)])


async def test_a_fresh_connection_per_request_buys_nothing(redis: Redis, stack: Processes) -> None:
    """A fresh connection per request (no keep-alive) changes nothing: the bucket is the
    client address, kept in Redis, so every admission replica shares it."""
    admission: ServiceProcess = await stack.start("admission", **LIMIT_ENV)
    statuses: Counter[int] = Counter()
    for _ in range(40):
        async with aiohttp.ClientSession() as session:
            headers = {"X-Forwarded-For": "198.51.100.99"}
            body = {"login": "someone@example.com"}
            async with session.post(
                admission.url + "/v1/password-resets", json=body, headers=headers
            ) as reply:
                statuses[reply.status] += 1
    assert statuses[202] <= budget(10) and statuses[429] >= 40 - budget(10)


async def test_every_forwarded_for_line_is_read_as_one_list(redis: Redis, stack: Processes) -> None:
    """A proxy may add its own X-Forwarded-For line rather than append to the client's: the
    client's own line comes first, whatever it says, and must not mint a budget per request."""
    admission = await stack.start("admission", **LIMIT_ENV)
    statuses: Counter[int] = Counter()
    async with aiohttp.ClientSession() as session:
        for _ in range(25):
            headers = CIMultiDict(
                [
                    ("X-Forwarded-For", f"198.18.{random.randrange(256)}.1"),
                    ("X-Forwarded-For", "198.51.100.77"),
                ]
            )
            async with session.post(
                admission.url + "/v1/password-resets",
                json={"login": "someone@example.com"},
                headers=headers,
            ) as reply:
                statuses[reply.status] += 1
    print(f"\n25 requests with two X-Forwarded-For lines: {statuses[202]} admitted")
    assert statuses[202] <= budget(10), statuses
    limited = [k async for k in redis.scan_iter(IP_LIMIT_PREFIX + "*")]
    assert limited == [IP_LIMIT_PREFIX + "198.51.100.77"], limited

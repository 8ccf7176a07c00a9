"""Invariant 9, timing half, measured: the public endpoint's latency does not tell an unknown
login from a known one that creates an operation, converges on a live one, or hits the
cooldown.

What is measured: the admission process (one uvloop process, IP limit on with a budget it
never reaches, Redis directory) from clients on the same machine over loopback, each one
request at a time on its own keep-alive connection (eight, as in ``-m slow``: at a load average
of 23 the default run's 1,800 requests at the 10 ms floor took 11 s on four clients, 6 s on
eight), the four kinds interleaved in random order so drift (other tests, CPU
frequency, Redis background work, the other clients) lands on all of them alike. Each known
kind is compared with the unknown one by a two-sample Kolmogorov-Smirnov test and a
Mann-Whitney U test (tests/security/stats.py, checked against scipy); the test fails only on
p < 0.001 in both, and prints both p-values and the median difference in microseconds.

The default run takes 400 samples of each kind; ``-m slow`` takes 3,000. tests/admission/
test_invariants.py shows the structural reason (the same Redis commands for every kind)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterator

import aiohttp
import pytest
from redis.asyncio import Redis

from shared.tokens import parse_keys
from tests.conftest import TEST_TOKEN_KEYS
from tests.security.conftest import BEARER, add_accounts
from tests.security.stats import Comparison, compare
from tests.support.processes import Processes

KINDS = ("unknown", "created", "converged", "cooldown")
THRESHOLD = 0.001  # generous: a real difference of tens of µs shows up as p ~ 0 at n=3,000
ENV = {
    "RESETGATE_IP_LIMIT_PER_MINUTE": "1000000",
    "RESETGATE_IP_LIMIT_BURST": "100000",
    "RESETGATE_LOG_LEVEL": "INFO",
}


@pytest.mark.serial  # a measurement: parallel workers' load would be noise in the samples
async def test_invariant_9_public_timing_is_indistinguishable(
    redis: Redis, stack: Processes
) -> None:
    results = await measure(redis, stack, samples=400, floor_ms=10, clients=8)
    for kind, result in results.items():
        assert max(result.ks_p, result.mwu_p) >= THRESHOLD, f"{kind} vs unknown: {result}"


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_invariant_9_public_timing_is_indistinguishable_3000_samples(
    redis: Redis, stack: Processes
) -> None:
    """At the default floor (25 ms); first, for the record, without it (no assertion: that
    is what the floor is for)."""
    await measure(redis, stack, samples=3000, floor_ms=0, clients=1)
    await redis.flushall()
    await stack["admission"].stop()
    results = await measure(redis, stack, samples=3000, floor_ms=25, clients=8)
    for kind, result in results.items():
        assert max(result.ks_p, result.mwu_p) >= THRESHOLD, f"{kind} vs unknown: {result}"


async def measure(
    redis: Redis, stack: Processes, samples: int, floor_ms: int, clients: int
) -> dict[str, Comparison]:
    admission = await stack.start(
        "admission", RESETGATE_PUBLIC_RESPONSE_FLOOR_MS=str(floor_ms), **ENV
    )
    logins = await prepare(redis, admission.url, samples)
    warm_up = iter(random.choices(KINDS, k=200))
    order = [kind for kind in KINDS for _ in range(samples)]
    random.shuffle(order)
    timings: dict[str, list[int]] = {kind: [] for kind in KINDS}
    await asyncio.gather(
        *(client(admission.url, warm_up, logins, {k: [] for k in KINDS}) for _ in range(clients))
    )
    queue = iter(order)
    await asyncio.gather(*(client(admission.url, queue, logins, timings) for _ in range(clients)))
    results = {kind: compare(timings["unknown"], timings[kind]) for kind in KINDS[1:]}
    report(timings, results, floor_ms, clients)
    counts = await admissions_by_result(admission.ops_url)
    for result in ("unknown_login", "created", "converged", "cooldown"):
        assert counts.get(result, 0) >= samples, counts  # each kind really was that kind
    return results


async def client(
    url: str,
    kinds: Iterator[str],
    logins: dict[str, Iterator[str]],
    timings: dict[str, list[int]],
) -> None:
    """One caller on one keep-alive connection, one request at a time, timing each."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) as session:
        for kind in kinds:
            login = next(logins[kind])
            started = time.perf_counter_ns()
            async with session.post(url + "/v1/password-resets", json={"login": login}) as reply:
                body = await reply.read()
            elapsed = time.perf_counter_ns() - started
            assert (reply.status, body) == (202, b'{"status":"received"}')
            timings[kind].append(elapsed)


async def prepare(redis: Redis, url: str, samples: int) -> dict[str, Iterator[str]]:
    """Logins for each kind: fresh accounts (created), accounts with a live operation
    (converged), accounts whose operation was used up (cooldown), unknown logins."""
    fresh = await add_accounts(redis, samples + 200, prefix="new")
    live = await add_accounts(redis, 20, prefix="live")
    spent = await add_accounts(redis, 20, prefix="spent")
    keys = parse_keys(TEST_TOKEN_KEYS)
    async with aiohttp.ClientSession(headers=BEARER) as session:
        for _, account_id in live + spent:
            body = {"account_id": account_id, "entry_point": "agent"}
            async with session.post(url + "/internal/v1/recovery-operations", json=body) as r:
                operation_id = (await r.json())["operation_id"]
            if (_, account_id) in spent:
                token = {"operation_id": operation_id, "token": keys.derive(operation_id)}
                async with session.post(url + "/internal/v1/reset-tokens/consume", json=token) as r:
                    assert r.status == 200
    return {
        "unknown": (f"nobody{i}@example.net" for i in range(10**9)),
        "created": iter(login for login, _ in fresh),
        "converged": cycle_logins(live),
        "cooldown": cycle_logins(spent),
    }


def cycle_logins(accounts: list[tuple[str, str]]) -> Iterator[str]:
    while True:
        yield from (login for login, _ in accounts)


def report(
    timings: dict[str, list[int]], results: dict[str, Comparison], floor_ms: int, clients: int
) -> None:
    from statistics import median, quantiles

    print(f"\nfloor {floor_ms} ms, {clients} concurrent client(s):")
    for kind in KINDS:
        values = timings[kind]
        p99 = quantiles(values, n=100)[98] / 1000
        print(f"{kind:>9}: n={len(values)} median {median(values) / 1000:.0f} µs, p99 {p99:.0f} µs")
    for kind, result in results.items():
        print(f"{kind:>9} vs unknown: {result}")


async def admissions_by_result(url: str) -> dict[str, int]:
    from prometheus_client.parser import text_string_to_metric_families

    async with aiohttp.ClientSession() as session, session.get(url + "/metrics") as reply:
        text = await reply.text()
    counts: dict[str, int] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            if sample.name == "resetgate_admissions_total" and labels["entry_point"] == "public":
                counts[labels["result"]] = int(sample.value)
    return counts

"""The storm: N operations admitted in a burst against a provider limited to R sends/s.

Real processes: a redis-server, the sandbox provider, and two `python -m services.sender`.
Ambiguous attempts (with --drop) are reconciled by the same code the poller runs.
Prints one table row per run; targets: drain <= 1.05 x N/R, 429s <= 1% of N,
zero duplicates, zero lost.

    .venv/bin/python benchmarks/storm.py                      # N=10000, R=200
    .venv/bin/python benchmarks/storm.py --form rotate
    .venv/bin/python benchmarks/storm.py --drop 0.02
    .venv/bin/python benchmarks/storm.py --provider postmark   # the sandbox as Postmark
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from redis.asyncio import Redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from services.ctl.embedded import RedisServer
from services.sandbox.testing import (
    SANDBOX_API_KEY,
    run_sandbox_process,
    sandbox_stats,
)
from shared import keys
from shared.admission import Admitter
from shared.providers.factory import ProviderConfig, build
from shared.reconcile import LookupThrottled, due_ambiguous, reconcile
from shared.settings import PolicySettings
from shared.tokens import parse_keys
from tests.support.processes import Processes, ServiceProcess

TOKEN_KEYS = "bench:benchmark-secret-0123456789abcdef"
PARTITIONS = 16
TERMINAL = {"accepted", "failed", "exhausted", "expired"}
# The senders' ceiling sits this far under the provider's rate: two equal-rate buckets
# drift into 429s, and each 429 stops every sender for its (rounded-up) Retry-After.
CEILING_SHARE = 0.98
PROVIDER = "http"  # --provider: which API the sandbox and the senders speak
MAILGUN_DOMAIN = "storm.mailgun.test"
# Providers without a key are looked up only about sends this old (they may still be
# processing a request whose answer was dropped); the storm's own drops answer at once.
SETTLE_SECONDS = 2.0


def policy(redis_url: str) -> PolicySettings:
    return PolicySettings(redis_url=redis_url, token_keys=TOKEN_KEYS, partitions=PARTITIONS)


async def seed(client: Redis, n: int, settings: PolicySettings) -> list[str]:
    """Directory rows and N admitted operations, in a burst."""
    async with client.pipeline(transaction=False) as pipe:
        for i in range(n):
            pipe.hset(keys.directory_account(f"storm-{i}"), mapping={"email": f"p{i}@example.com"})
        await pipe.execute()
    admitter = Admitter(client, settings, parse_keys(TOKEN_KEYS))
    ops: list[str] = []
    # 100 at a time: 500 concurrent first connections time out on a loaded machine.
    for start in range(0, n, 100):
        batch = await asyncio.gather(
            *(admitter.admit(f"storm-{i}", "public") for i in range(start, min(n, start + 100)))
        )
        ops += [a.operation_id for a in batch]
    return ops


def sender_env(redis_url: str, provider_url: str, rate: float) -> dict[str, str]:
    return {
        "RESETGATE_REDIS_URL": redis_url,
        "RESETGATE_PROVIDER_URL": provider_url,
        "RESETGATE_PROVIDER_API_KEY": SANDBOX_API_KEY,
        "RESETGATE_TOKEN_KEYS": TOKEN_KEYS,
        "RESETGATE_PARTITIONS": str(PARTITIONS),
        "RESETGATE_PROVIDER_MAX_RATE": str(rate * CEILING_SHARE),
        "RESETGATE_PROVIDER_BURST": "2",
        "RESETGATE_CONCURRENCY": "32",
        "RESETGATE_LOG_LEVEL": "WARNING",
        "RESETGATE_BACKOFF_BASE_SECONDS": "1",
        "RESETGATE_BACKOFF_CAP_SECONDS": "10",
        "RESETGATE_PROVIDER_KIND": PROVIDER,
        "RESETGATE_PROVIDER_NAME": PROVIDER,
        "RESETGATE_MAILGUN_DOMAIN": MAILGUN_DOMAIN,
    }


def provider_config(provider_url: str) -> ProviderConfig:
    return ProviderConfig(
        name=PROVIDER, kind=PROVIDER, url=provider_url, api_key=SANDBOX_API_KEY,  # type: ignore[arg-type]
        connect_timeout=3, total_timeout=15, key_retention_seconds=86400,
        settle_seconds=SETTLE_SECONDS, mailgun_domain=MAILGUN_DOMAIN,
        mailgun_events_delay_seconds=SETTLE_SECONDS,
    )


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def states(client: Redis, ops: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for start in range(0, len(ops), 1000):
        async with client.pipeline(transaction=False) as pipe:
            for op in ops[start : start + 1000]:
                pipe.hget(keys.PartitionKeys.of(op).operation(op), "state")
            for state in await pipe.execute():
                counts[state or "missing"] = counts.get(state or "missing", 0) + 1
    return counts


async def reconcile_ambiguous(client: Redis, provider: Any, settings: PolicySettings) -> None:
    for p in range(PARTITIONS):
        for op in await due_ambiguous(client, p):
            try:
                await reconcile(client, provider, settings, op)
            except LookupThrottled:
                await asyncio.sleep(1)


async def live_count(client: Redis) -> int:
    """Operations not yet terminal: the live index, 16 commands instead of N."""
    async with client.pipeline(transaction=False) as pipe:
        for p in range(PARTITIONS):
            pipe.zcard(keys.PartitionKeys(p).live)
        return sum(await pipe.execute())


async def drain(
    client: Redis, ops: list[str], provider_url: str, settings: PolicySettings, timeout: float
) -> tuple[float, dict[str, int]]:
    started = time.monotonic()
    async with aiohttp.ClientSession() as session:
        provider = build(provider_config(provider_url), session)
        while time.monotonic() - started < timeout and await live_count(client):
            await reconcile_ambiguous(client, provider, settings)
            await asyncio.sleep(0.1)
    return time.monotonic() - started, await states(client, ops)


async def storm(n: int, rate: float, form: str, drop: float, timeout: float) -> dict[str, Any]:
    server = RedisServer().start()
    client = Redis.from_url(server.url, decode_responses=True, max_connections=1000)
    settings = policy(server.url)
    try:
        ops = await seed(client, n, settings)
        async with run_sandbox_process(
            send_rate_per_second=rate,
            send_burst=int(max(2, rate / 20)),
            retry_after_form=form,
            drop_probability=drop,
            mode=PROVIDER,
            delivered_delay_seconds=60,
            seed=7,
            log_level="WARNING",
        ) as provider_url:
            env = sender_env(server.url, provider_url, rate)
            logs = Path(tempfile.mkdtemp(prefix="rg-storm-"))
            async with Processes(logs, env) as senders:
                started = []
                for i in (1, 2):
                    name = f"sender-{i}"
                    started.append(
                        ServiceProcess(
                            name,
                            {**env, "RESETGATE_CONSUMER_NAME": name},
                            logs,
                            module="services.sender",
                        )
                    )
                    senders.services[name] = started[-1]
                # Startup (imports, connecting) is not drain time: the clock starts once
                # both senders are ready.
                await asyncio.gather(*(sender.start() for sender in started))
                elapsed, counts = await drain(client, ops, provider_url, settings, timeout)
                cpu = sum(cpu_seconds(s.process.pid) for s in started if s.process)
            stats = await sandbox_stats(provider_url)
    finally:
        await client.aclose()
        server.stop()
    accepted = counts.get("accepted", 0)
    return {
        "n": n,
        "rate": rate,
        "form": form,
        "drop": drop,
        "drain_s": elapsed,
        "ideal_s": n / rate,
        "ratio": elapsed / (n / rate),
        "requests": sum(v for k, v in stats["requests_by_route"].items() if k.startswith("POST")),
        "provider": PROVIDER,
        "throttled": stats["send_throttled_total"],
        "emails": stats["emails_sent_total"],
        "duplicates": stats["duplicate_sends_total"],
        "accepted": accepted,
        "exhausted": counts.get("exhausted", 0),
        "failed": counts.get("failed", 0),
        "lost": n - sum(v for k, v in counts.items() if k in TERMINAL),
        "review": counts.get("review", 0),
        "cpu_s": cpu,
    }


def print_table(rows: list[dict[str, Any]]) -> None:
    head = (
        f"{'provider':<9} {'N':>6} {'R/s':>5} {'retry-after':<13} {'drop':>5} "
        f"{'drain s':>8} {'ideal s':>8} "
        f"{'ratio':>6} {'sends':>6} {'429s':>5} {'429 %N':>6} {'dups':>4} {'exh':>4} "
        f"{'lost':>4} {'cpu s':>6}"
    )
    print(head)
    for r in rows:
        print(
            f"{r['provider']:<9} {r['n']:>6} {r['rate']:>5.0f} {r['form']:<13} "
            f"{r['drop']:>5.2f} "
            f"{r['drain_s']:>8.1f} {r['ideal_s']:>8.1f} {r['ratio']:>6.3f} {r['requests']:>6} "
            f"{r['throttled']:>5} {100 * r['throttled'] / r['n']:>6.2f} {r['duplicates']:>4} "
            f"{r['exhausted']:>4} {r['lost']:>4} {r['cpu_s']:>6.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--form", default="delay-seconds")
    parser.add_argument("--drop", type=float, default=0.0)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--all", action="store_true", help="the three standard runs")
    parser.add_argument(
        "--provider", default="http", choices=("http", "sendgrid", "postmark", "mailgun"),
        help="the API the sandbox and the senders speak (SES: see tests/providers)",
    )
    parser.add_argument(
        "--ceiling-share",
        type=float,
        default=CEILING_SHARE,
        help="RESETGATE_PROVIDER_MAX_RATE as a share of the provider's rate",
    )
    args = parser.parse_args()
    globals()["CEILING_SHARE"] = args.ceiling_share
    globals()["PROVIDER"] = args.provider
    runs = (
        [("delay-seconds", 0.0), ("rotate", 0.0), ("delay-seconds", 0.02)]
        if args.all
        else [(args.form, args.drop)]
    )
    rows = [asyncio.run(storm(args.n, args.rate, form, drop, args.timeout)) for form, drop in runs]
    print_table(rows)


if __name__ == "__main__":
    main()

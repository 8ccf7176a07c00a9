"""Delivery observation of N accepted operations through the provider's events feed.

Real processes: a redis-server, the sandbox provider and ``python -m services.poller``.
The driver sends N emails through the sandbox's send route (so the feed really carries N
delivered events) and writes each accepted operation into Redis exactly as the sender's
finalise leaves it (op hash, message map, observe zset). It then waits until every
operation has observed delivery and prints one row per run:

    live     the poller runs while the emails go out: lag is the steady-state staleness
    backlog  N events are waiting when the poller starts: catch-up rate

    .venv/bin/python benchmarks/observation.py                  # N=50000, three runs
    .venv/bin/python benchmarks/observation.py --ops 5000 --runs live-default
    .venv/bin/python benchmarks/observation.py --ops 6000 --send-rate 50 --runs live-default

Pushed events (benchmarks/observation_push.py: the SendGrid webhook, the SES queue):

    .venv/bin/python benchmarks/observation.py --mode webhook --ops 30000 --rate 1000
    .venv/bin/python benchmarks/observation.py --mode webhook --ops 30000 --rate 1000 \
        --profile /tmp/rg-profile                 # + py-spy flame graphs (pip install py-spy)
    .venv/bin/python benchmarks/observation.py --mode queue --ops 3000 --rate 100
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from redis.asyncio import Redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import figures
from benchmarks import observation_push as push
from services.ctl.embedded import RedisServer, cleanup_directory
from services.poller.settings import PollerSettings
from shared import ids
from shared.keys import PartitionKeys
from shared.service import run as run_service
from tests.support.processes import ServiceProcess
from tests.support.sandbox import SANDBOX_API_KEY, reset, run_sandbox_process, sandbox_stats

PARTITIONS = 16
SEND_CONCURRENCY = 64
WINDOW_MS = 7200 * 1000


@dataclass(frozen=True)
class Run:
    name: str
    mode: str  # live | backlog
    interval: float
    batch: int
    per_minute: int


_DEFAULTS = PollerSettings.model_fields
RUNS = {
    "live-default": Run(
        "live-default",
        "live",
        _DEFAULTS["poll_interval_seconds"].default,
        _DEFAULTS["poll_batch"].default,
        _DEFAULTS["poll_max_requests_per_minute"].default,
    ),
    "backlog-default": Run(
        "backlog-default",
        "backlog",
        _DEFAULTS["poll_interval_seconds"].default,
        _DEFAULTS["poll_batch"].default,
        _DEFAULTS["poll_max_requests_per_minute"].default,
    ),
    "live-old-default": Run("live-old-default", "live", 5.0, 500, 120),
    "live-tuned": Run("live-tuned", "live", 1.0, 1000, 600),
    "backlog-tuned": Run("backlog-tuned", "backlog", 1.0, 1000, 600),
}


def operation_fields(op: str, partition: int, message_id: str, now: int) -> dict[str, Any]:
    """An accepted operation's hash as the scripts write it (id, partition and creation
    time live in the id; delivery "unknown" is the default, not stored)."""
    return {
        "account_id": f"bench-{op}",
        "state": "accepted",
        "token_kid": "bench",
        "token_expires_at": now + 3_600_000,
        "horizon_at": now + 3_480_000,
        "attempts": 1,
        "provider": "http",
        "provider_message_id": message_id,
    }


async def send_one(session: aiohttp.ClientSession, url: str, op: str) -> str:
    body = {
        "from": "bench@game.example",
        "to": [f"{op}@example.com"],
        "subject": "Reset",
        "text": "bench",
        "tags": {"operation_id": op},
    }
    headers = {"Authorization": f"Bearer {SANDBOX_API_KEY}", "Idempotency-Key": op}
    async with session.post(url + "/email/send", json=body, headers=headers) as response:
        return str((await response.json())["id"])


async def accept(redis: Redis, rows: list[tuple[str, int, str]]) -> None:
    """What finalise_attempt writes for an accepted send, for a batch of operations."""
    now = int(time.time() * 1000)
    async with redis.pipeline(transaction=False) as pipe:
        for op, partition, message_id in rows:
            pk = PartitionKeys(partition)
            pipe.hset(pk.operation(op), mapping=operation_fields(op, partition, message_id, now))
            pipe.hset(pk.messages, message_id, op)
            pipe.zadd(pk.observe, {op: now + WINDOW_MS})
        await pipe.execute()


async def drive(redis: Redis, url: str, n: int, rate: float = 0) -> list[str]:
    """Send N emails (at most ``rate``/s when set) and record each accepted operation right
    after its send."""
    ops = [ids.operation_id(i % PARTITIONS) for i in range(n)]
    step = max(1, min(256, int(rate / 10))) if rate else 256
    began = time.monotonic()
    connector = aiohttp.TCPConnector(limit=SEND_CONCURRENCY)
    async with aiohttp.ClientSession(connector=connector) as session:
        for start in range(0, n, step):
            chunk = ops[start : start + step]
            message_ids = await asyncio.gather(*(send_one(session, url, op) for op in chunk))
            await accept(
                redis,
                [(op, int(op.split("-")[1]), m) for op, m in zip(chunk, message_ids, strict=True)],
            )
            if rate:
                await asyncio.sleep(max(0.0, began + (start + step) / rate - time.monotonic()))
    return ops


async def waiting(redis: Redis) -> int:
    async with redis.pipeline(transaction=False) as pipe:
        for p in range(PARTITIONS):
            pipe.zcard(PartitionKeys(p).observe)
        return int(sum(await pipe.execute()))


async def until_observed(redis: Redis, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while await waiting(redis):
        if time.monotonic() > deadline:
            raise SystemExit(f"not all observed after {timeout}s ({await waiting(redis)} left)")
        await asyncio.sleep(0.25)


async def lags(redis: Redis, ops: list[str]) -> list[float]:
    """Per operation: event occurred_at -> recorded by the poller, in seconds."""
    values: list[float] = []
    for start in range(0, len(ops), 5000):
        async with redis.pipeline(transaction=False) as pipe:
            for op in ops[start : start + 5000]:
                pipe.hmget(
                    PartitionKeys.of(op).operation(op),
                    ["delivery_event_at", "delivery_observed_at"],
                )
            for event_at, observed_at in await pipe.execute():
                if event_at and observed_at:
                    values.append((int(observed_at) - int(event_at)) / 1000)
    return values


def poller_env(redis_url: str, provider_url: str, run: Run) -> dict[str, str]:
    return {
        "RESETGATE_REDIS_URL": redis_url,
        "RESETGATE_PROVIDER_URL": provider_url,
        "RESETGATE_PROVIDER_API_KEY": SANDBOX_API_KEY,
        "RESETGATE_PARTITIONS": str(PARTITIONS),
        "RESETGATE_POLL_INTERVAL_SECONDS": str(run.interval),
        "RESETGATE_POLL_BATCH": str(run.batch),
        "RESETGATE_POLL_MAX_REQUESTS_PER_MINUTE": str(run.per_minute),
        "RESETGATE_LOG_LEVEL": "WARNING",
    }


def poller(redis_url: str, provider_url: str, run: Run, logs: Path) -> ServiceProcess:
    return ServiceProcess("poller", poller_env(redis_url, provider_url, run), logs)


async def one_run(
    run: Run, n: int, redis_server: RedisServer, url: str, logs: Path, rate: float
) -> dict[str, Any]:
    redis = Redis.from_url(redis_server.url, decode_responses=True)
    await redis.flushall()
    await reset(url)
    service = poller(redis_server.url, url, run, logs)
    started = time.monotonic()
    if run.mode == "live":
        await service.start()
        ops = await drive(redis, url, n, rate)
    else:
        ops = await drive(redis, url, n)
        await asyncio.sleep(2)  # every delivered event is in the feed now
        started = time.monotonic()
        await service.start()
    await until_observed(redis, timeout=900)
    elapsed = time.monotonic() - started
    stats = await sandbox_stats(url)
    duplicates = await service.metric("resetgate_delivery_events_duplicate_total")
    await service.stop()
    values = await lags(redis, ops)
    await redis.aclose()
    polls = stats["requests_by_route"].get("GET /email/events", 0)
    return {
        "run": run,
        "ops": n,
        "observed": len(values),
        "seconds": elapsed,
        "polls": polls,
        "lags": values,
        "duplicates": duplicates,
        "throttled": stats["poll_throttled_total"],
    }


def quantile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else 0


def report(rows: list[dict[str, Any]]) -> None:
    print(
        f"\n{'run':<15}{'interval':>9}{'batch':>7}{'req/min':>9}{'ops':>8}{'observed':>10}"
        f"{'total s':>9}{'polls':>7}{'polls/min':>10}{'events/s':>10}{'lag p50':>9}"
        f"{'lag p99':>9}{'dup':>5}"
    )
    for row in rows:
        run: Run = row["run"]
        minutes = row["seconds"] / 60
        live = run.mode == "live"
        p50 = f"{quantile(row['lags'], 50):.2f}s" if live else "-"
        p99 = f"{quantile(row['lags'], 99):.2f}s" if live else "-"
        print(
            f"{run.name:<15}{run.interval:>8}s{run.batch:>7}{run.per_minute:>9}{row['ops']:>8}"
            f"{row['observed']:>10}{row['seconds']:>9.1f}{row['polls']:>7}"
            f"{row['polls'] / minutes:>10.1f}{row['observed'] / row['seconds']:>10.0f}"
            f"{p50:>9}{p99:>9}{int(row['duplicates']):>5}"
        )
    figures.emit(
        {
            f"{row['run'].name}: events/s, lag p99": f"{row['observed'] / row['seconds']:.0f}/s"
            + (f", {quantile(row['lags'], 99):.2f} s" if row["run"].mode == "live" else "")
            for row in rows
        }
    )
    print(
        "\nlive: the poller runs while the N emails are sent (lag = event occurred -> "
        "recorded); backlog: N events wait in the feed when it starts (catch-up)."
    )


async def push_run(
    args: argparse.Namespace, redis_server: RedisServer, url: str, logs: Path
) -> None:
    """Webhook or queue mode: N accepted operations, their events pushed at ``--rate``."""
    redis = Redis.from_url(redis_server.url, decode_responses=True)
    await redis.flushall()
    ops = push.operation_ids(args.ops, PARTITIONS)
    for start in range(0, len(ops), 5000):
        await accept(
            redis, [(op, int(op.split("-")[1]), f"bench-{op}") for op in ops[start : start + 5000]]
        )
    # The pull feed stays idle (nothing is sent through the sandbox); it polls rarely.
    env = poller_env(redis_server.url, url, Run("push", "push", 60.0, 1000, 120))
    if args.mode == "webhook":
        row = await push.webhook_run(redis, ops, env, logs, args.rate, args.batch, args.profile)
        shape = f"SendGrid batches of {args.batch}"
    else:
        row = await push.queue_run(redis, ops, env, logs, args.rate, args.wait)
        shape = f"SES via SNS -> SQS, long poll {args.wait} s"
    await redis.aclose()
    lags = row["lags"]
    print(
        f"\n{args.mode}: {args.ops} events at {args.rate:g}/s ({shape}); sent in "
        f"{row['send_seconds']:.1f} s; observed {row['observed']}; non-200 {row['failures']}"
    )
    print(
        f"lag p50 {quantile(lags, 50):.3f} s, p99 {quantile(lags, 99):.3f} s, "
        f"max {max(lags, default=0):.3f} s; poller CPU {row['cpu']:.1f} s "
        f"({1000 * row['cpu'] / max(1, row['observed']):.3f} s per 1,000 events); "
        f"load average {os.getloadavg()[0]:.1f}; poller logs in {logs}"
    )


async def main(args: argparse.Namespace) -> None:
    logs = Path(tempfile.mkdtemp(prefix="rg-bench-observation-"))
    if args.mode != "pull":
        (logs / "redis").mkdir()
        redis_server = RedisServer(directory=str(logs / "redis")).start()
        try:
            async with run_sandbox_process(log_level="WARNING") as url:
                await push_run(args, redis_server, url, logs)
        finally:
            redis_server.stop()
            cleanup_directory(str(logs / "redis"))
        return
    (logs / "redis").mkdir()
    redis_server = RedisServer(directory=str(logs / "redis")).start()
    rows = []
    try:
        async with run_sandbox_process(delivered_delay_seconds=1.0, log_level="WARNING") as url:
            for name in args.runs:
                rows.append(
                    await one_run(RUNS[name], args.ops, redis_server, url, logs, args.send_rate)
                )
                print(f"{name}: done in {rows[-1]['seconds']:.1f}s", flush=True)
    finally:
        redis_server.stop()
        cleanup_directory(str(logs / "redis"))
    report(rows)
    rate = f"{args.send_rate:g}/s" if args.send_rate else "unpaced"
    print(f"\n{args.ops} operations per run, live sends {rate}; poller logs in {logs}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=50_000)
    parser.add_argument(
        "--runs",
        nargs="+",
        default=["live-default", "live-tuned", "backlog-tuned"],
        choices=list(RUNS),
    )
    parser.add_argument("--mode", default="pull", choices=["pull", "webhook", "queue"])
    parser.add_argument("--rate", type=float, default=1000, help="pushed events/s")
    parser.add_argument("--batch", type=int, default=50, help="events per webhook POST")
    parser.add_argument("--wait", type=int, default=20, help="SQS long-poll seconds")
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="webhook mode: py-spy flame graphs of the poller and the driver into this directory",
    )
    parser.add_argument(
        "--send-rate",
        type=float,
        default=0,
        help="sends/s in the live runs (default: as fast as the sandbox takes)",
    )
    arguments = parser.parse_args()
    run_service(lambda: main(arguments))  # uvloop, as the services: the driver must keep up

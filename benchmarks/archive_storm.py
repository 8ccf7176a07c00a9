"""The storm with the archive on: N operations admitted through the internal API and sent by
the real services while the real archiver copies each settled one to a real PostgreSQL.

    .venv/bin/python benchmarks/archive_storm.py                                  # N=10000
    .venv/bin/python benchmarks/archive_storm.py --pg-outage 60 --kill-archiver --prometheus

Real processes (benchmarks/storm.py's pieces, its default scenario ceiling-1.5 at R sends/s):
a redis-server, a PostgreSQL (services/ctl/localpg.py, migrated), the sandbox provider, 2
admission, the poller, 2 senders and the archiver, every service with RESETGATE_ARCHIVE_ENABLED
and the DSN. ``--pg-outage S`` stops PostgreSQL for S seconds once a quarter of N is archived
(mid-storm); ``--kill-archiver`` SIGKILLs the archiver mid-batch (early in the outage,
holding the batch it read and could not write; with no outage, once half is archived) and
starts it again; ``--prometheus`` runs a real Prometheus scraping the archiver every second
and evaluating the chart's ArchiveLagHigh rule (its expression as shipped, its threshold and
``for`` scaled to the outage: it must fire during the outage, which then lasts until it has,
and clear after it).

Once the storm is drained, every delivery observed and the settled streams empty, each
operation is read back through the archive's reader (shared/archive.py) and compared with
what Redis still holds (the tail, ``--tail``, keeps it there): hash and ledger byte for byte,
delivery events applied. Printed: drain time, archived rows (and distinct operations: none
twice), mismatches, the archive lag per operation (settlement in Redis to the transaction
that wrote it) p50/p99/max and the lag gauge's highest scrape, the alert's times, and Redis
memory per operation during the tail and after it (every operation's keys gone, the poller's
housekeeping done), with what is left by key shape.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import yaml
from redis.asyncio import Redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import figures
from benchmarks.archive_memory import key_shapes, per_operation, used_memory
from benchmarks.storm import (
    PARTITIONS,
    STARTUP_SECONDS,
    SenderFleet,
    admit_all,
    live_count,
    seed_directory,
    service_env,
    wait_until,
)
from benchmarks.storm_report import ADMISSION_CLIENTS, SCENARIOS, ceiling, sandbox_overrides
from services.ctl.embedded import RedisServer, free_port
from services.ctl.localpg import LocalPostgres
from shared import archive as evidence
from shared import archive_schema as schema
from shared.keys import ARCHIVE_GROUP, PartitionKeys
from tests.alerts.prometheus import PrometheusServer
from tests.alerts.promql import RULES_FILE
from tests.archive.helpers import comparable
from tests.support.processes import Processes, ServiceProcess
from tests.support.sandbox import run_sandbox_process

SCENARIO = SCENARIOS["ceiling-1.5"]
ALERT = "ArchiveLagHigh"
CHUNK = 1000
COMPARE_CONCURRENCY = 8
# Poll the archive's progress, the lag gauge and the alert this often.
SAMPLE_SECONDS = 0.5


@dataclass
class Plan:
    n: int = 10_000
    rate: float = 200.0
    tail_s: int = 600  # RESETGATE_ARCHIVE_TAIL_SECONDS: long enough to compare before it ends
    outage_s: float = 0.0  # PostgreSQL stopped this long once a quarter is archived
    kill: bool = False  # SIGKILL the archiver mid-batch (see disrupt), then start it again
    prometheus: bool = False
    memory: bool = True  # wait out the tail and measure what Redis keeps
    archiver_env: dict[str, str] = field(default_factory=dict)  # its non-default settings
    timeout: float = 900.0  # for each wait (drain, archive, tail)
    # Replicas: a deployment's two of each by default; the test's small storm needs one of
    # each (every process started costs its imports, about 1.8 CPU-s).
    admissions: int = 2
    senders: int = 2


@dataclass
class Outcome:
    plan: Plan
    drain_s: float = 0.0
    operations: int = 0  # rows in the archive's operations table
    distinct: int = 0  # distinct operation ids among them
    attempt_rows: int = 0
    ledger_rows: int = 0  # the same, counted in Redis
    event_rows: int = 0
    mismatched: list[str] = field(default_factory=list)  # differ from Redis, or missing
    not_compared: int = 0  # gone from Redis before the comparison (the tail too short)
    lag_ms: tuple[float, float, float] = (0.0, 0.0, 0.0)  # per operation: p50, p99, max
    gauge_max: float = 0.0  # the highest resetgate_archive_lag_seconds scraped
    alert_rule: str = ""
    alert_before: bool = False  # active before PostgreSQL stopped (it should not be)
    alert_fired_s: float | None = None  # after PostgreSQL stopped
    alert_cleared_s: float | None = None  # after PostgreSQL started again
    outage: tuple[float, float] = (0.0, 0.0)  # monotonic stop, start
    killed_holding: int = -1  # entries it held unacknowledged when SIGKILLed (-1: not killed)
    # Bytes per operation (used_memory, its keyspace part) while every one is still in
    # Redis, and once the tail let them all go.
    tail_memory: tuple[float, float] = (0.0, 0.0)
    after_memory: tuple[float, float] = (0.0, 0.0)
    left: list[str] = field(default_factory=list)  # what remains after the tail, by key shape
    notes: list[str] = field(default_factory=list)

    @property
    def whole(self) -> bool:
        n = self.plan.n
        return (
            self.operations == self.distinct == n
            and not self.mismatched
            and not self.not_compared
            and self.attempt_rows == self.ledger_rows
        )


def scaled_rule(directory: Path, threshold: int, hold: int) -> Path:
    """The chart's ArchiveLagHigh rule alone, its expression as shipped but for the threshold
    (seconds behind) and ``for`` (seconds held), in a rules file of its own."""
    document = yaml.safe_load(RULES_FILE.read_text())
    rule = next(r for g in document["groups"] for r in g["rules"] if r.get("alert") == ALERT)
    rule["expr"], replaced = re.subn(r">\s*\d+(\.\d+)?\s*$", f"> {threshold}", rule["expr"].strip())
    if replaced != 1:
        raise RuntimeError(f"{ALERT}'s expression no longer ends in '> <seconds>': {rule['expr']}")
    rule["for"] = f"{hold}s"
    path = directory / "archive-lag.rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "archive", "rules": [rule]}]}))
    return path


async def archived(pool: asyncpg.Pool) -> int:
    return int(await pool.fetchval("SELECT count(*) FROM operations"))


async def settled_waiting(client: Redis) -> int:
    async with client.pipeline(transaction=False) as pipe:
        for p in range(PARTITIONS):
            pipe.xlen(PartitionKeys(p).settled)
        return int(sum(await pipe.execute()))


async def observing(client: Redis) -> int:
    async with client.pipeline(transaction=False) as pipe:
        for p in range(PARTITIONS):
            pipe.zcard(PartitionKeys(p).observe)
        return int(sum(await pipe.execute()))


async def held(client: Redis, ops: list[str]) -> int:
    """How many of ``ops`` still have their hash or ledger in Redis."""
    total = 0
    for start in range(0, len(ops), CHUNK):
        async with client.pipeline(transaction=False) as pipe:
            for op in ops[start : start + CHUNK]:
                keys = PartitionKeys.of(op)
                pipe.exists(keys.operation(op), keys.attempts(op))
            total += sum(1 for n in await pipe.execute() if n)
    return total


class Watch:
    """Samples the archive's progress, the lag gauge and (with Prometheus) the alert."""

    def __init__(self, client: Redis, pool: asyncpg.Pool, outcome: Outcome) -> None:
        self.client = client
        self.pool = pool
        self.outcome = outcome
        self.archiver: ServiceProcess | None = None
        self.prometheus: PrometheusServer | None = None
        self.count = 0

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.sample()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), SAMPLE_SECONDS)

    async def sample(self) -> None:
        out = self.outcome
        with contextlib.suppress(*evidence.ARCHIVE_ERRORS):  # stopped on purpose: count kept
            self.count = await archived(self.pool)
        if self.archiver and self.archiver.running:
            try:
                lag = await self.archiver.metric("resetgate_archive_lag_seconds")
                out.gauge_max = max(out.gauge_max, lag)
            except OSError:
                pass  # restarting
        if self.prometheus is None:
            return
        active = any(
            a["labels"].get("alertname") == ALERT and a["state"] == "firing"
            for a in await self.prometheus.alerts()
        )
        stopped, started = out.outage
        now = time.monotonic()
        if active and not stopped:
            out.alert_before = True
        elif active and stopped and out.alert_fired_s is None:
            out.alert_fired_s = now - stopped
        elif (
            not active and started and out.alert_fired_s is not None and out.alert_cleared_s is None
        ):
            out.alert_cleared_s = now - started

    async def until_archived(self, count: int, timeout: float) -> bool:
        return await wait_until(lambda: self._reached(count), timeout, step=SAMPLE_SECONDS)

    async def _reached(self, count: int) -> bool:
        return self.count >= count


async def disrupt(
    plan: Plan, outcome: Outcome, watch: Watch, stack: Processes, postgres: LocalPostgres
) -> None:
    """PostgreSQL stopped once a quarter is archived, and started again after the outage
    (with Prometheus, not before the alert fired);
    the archiver SIGKILLed as soon as it holds a batch it could not write (mid-batch: read,
    not acknowledged) and started again at once, so its successor is the one behind for the
    rest of the outage. Without an outage it is killed once half is archived."""
    if plan.outage_s and await watch.until_archived(plan.n // 4, plan.timeout):
        stopped = time.monotonic()
        outcome.outage = (stopped, 0.0)
        await asyncio.to_thread(postgres.stop)
        if plan.kill and await wait_until(lambda: _holding(watch.client), plan.outage_s):
            await kill_archiver(stack, watch.client, outcome)
        await asyncio.sleep(max(0.0, plan.outage_s - (time.monotonic() - stopped)))
        if plan.prometheus:  # a loaded machine may restart the archiver late: wait for it
            await wait_until(lambda: _fired(outcome), plan.timeout, step=SAMPLE_SECONDS)
        await asyncio.to_thread(postgres.start)
        outcome.outage = (stopped, time.monotonic())
    elif plan.kill and await watch.until_archived(plan.n // 2, plan.timeout):
        await kill_archiver(stack, watch.client, outcome)


async def _fired(outcome: Outcome) -> bool:
    return outcome.alert_fired_s is not None


async def _holding(client: Redis) -> bool:
    return await pending(client) > 0


async def kill_archiver(stack: Processes, client: Redis, outcome: Outcome) -> None:
    """SIGKILL, counting the entries it had read and not acknowledged, and start it again."""
    outcome.killed_holding = await pending(client)
    await stack["archiver"].kill()
    await stack["archiver"].start(STARTUP_SECONDS)


async def pending(client: Redis) -> int:
    """Entries the archivers have read and not acknowledged, on every settled stream."""
    async with client.pipeline(transaction=False) as pipe:
        for p in range(PARTITIONS):
            pipe.xpending(PartitionKeys(p).settled, ARCHIVE_GROUP)
        return sum(int(summary["pending"]) for summary in await pipe.execute())


async def compare(client: Redis, pool: asyncpg.Pool, ops: list[str], outcome: Outcome) -> None:
    """Each operation as the archive's reader returns it against what Redis holds now."""
    limit = asyncio.Semaphore(COMPARE_CONCURRENCY)

    async def one(op: str) -> None:
        keys = PartitionKeys.of(op)
        async with limit:
            raw = await client.hgetall(keys.operation(op))
            ledger = await client.lrange(keys.attempts(op), 0, -1)
            found = await evidence.read_operation(pool, op)
        if not raw:
            outcome.not_compared += 1
            return
        outcome.ledger_rows += len(ledger)
        if (
            found is None
            or comparable(found.current_hash()) != comparable(raw)
            or found.ledger != ledger
            or str(found.settled_at) != raw.get("settled_at")
        ):
            outcome.mismatched.append(op)

    await asyncio.gather(*(one(op) for op in ops))
    counts = await pool.fetchrow(
        "SELECT (SELECT count(*) FROM operations) AS operations,"
        " (SELECT count(DISTINCT operation_id) FROM operations) AS distinct_ops,"
        " (SELECT count(*) FROM attempts) AS attempts,"
        " (SELECT count(*) FROM delivery_events) AS events"
    )
    outcome.operations, outcome.distinct = counts["operations"], counts["distinct_ops"]
    outcome.attempt_rows, outcome.event_rows = counts["attempts"], counts["events"]
    lag = await pool.fetchrow(
        "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) AS p50,"
        " percentile_cont(0.99) WITHIN GROUP (ORDER BY ms) AS p99, max(ms) AS max"
        " FROM (SELECT extract(epoch FROM archived_at - settled_at) * 1000 AS ms"
        " FROM operations) AS lags"
    )
    outcome.lag_ms = (float(lag["p50"]), float(lag["p99"]), float(lag["max"]))


@asynccontextmanager
async def archive(outcome: Outcome) -> AsyncIterator[tuple[LocalPostgres, asyncpg.Pool]]:
    postgres = await asyncio.to_thread(LocalPostgres(free_port()).start)
    try:
        conn = await asyncpg.connect(postgres.dsn)
        try:
            await schema.migrate(conn)
        finally:
            await conn.close()
        pool = await asyncpg.create_pool(postgres.dsn, min_size=0, max_size=COMPARE_CONCURRENCY)
        try:
            yield postgres, pool
        finally:
            await pool.close()
    finally:
        await asyncio.to_thread(postgres.close)


async def storm(plan: Plan) -> Outcome:
    outcome = Outcome(plan)
    server = RedisServer().start()
    client = Redis.from_url(server.url, decode_responses=True)
    try:
        await seed_directory(client, plan.n)
        async with archive(outcome) as (postgres, pool):
            sandbox = {**sandbox_overrides(SCENARIO, plan.rate), "mode": "http"}
            async with run_sandbox_process(STARTUP_SECONDS, **sandbox, log_level="WARNING") as url:
                await _storm(plan, outcome, client, server.url, url, postgres, pool)
    finally:
        await client.aclose()
        server.stop()
    return outcome


async def _storm(
    plan: Plan,
    outcome: Outcome,
    client: Redis,
    redis_url: str,
    provider_url: str,
    postgres: LocalPostgres,
    pool: asyncpg.Pool,
) -> None:
    env = {
        **service_env(redis_url, provider_url, "http"),
        "RESETGATE_ARCHIVE_ENABLED": "true",
        "RESETGATE_ARCHIVE_DSN": postgres.dsn,
    }
    logs = Path(tempfile.mkdtemp(prefix="rg-archive-storm-"))
    outcome.notes.append(f"service logs in {logs}")
    async with Processes(logs, env) as stack:
        admissions = [
            ServiceProcess(f"admission-{i}", env, logs, module="services.admission")
            for i in range(1, plan.admissions + 1)
        ]
        stack.services.update({a.name: a for a in admissions})
        archiver = stack.add(
            "archiver", RESETGATE_ARCHIVE_TAIL_SECONDS=str(plan.tail_s), **plan.archiver_env
        )
        fleet = SenderFleet(stack, {**env, **ceiling(SCENARIO, plan.rate)}, plan.senders)
        await asyncio.gather(
            *(a.start(STARTUP_SECONDS) for a in admissions),
            stack.start("poller", STARTUP_SECONDS),
            archiver.start(STARTUP_SECONDS),
            fleet.start(),
        )
        watch = Watch(client, pool, outcome)
        watch.archiver = archiver
        async with prometheus_for(plan, outcome, archiver) as prometheus:
            watch.prometheus = prometheus
            baseline = await used_memory(client)
            stop = asyncio.Event()
            watching = asyncio.create_task(watch.run(stop))
            disrupting = asyncio.create_task(disrupt(plan, outcome, watch, stack, postgres))
            started = time.monotonic()
            ops, _ = await admit_all([a.url for a in admissions], plan.n, ADMISSION_CLIENTS)
            drained = await wait_until(lambda: _drained(client), plan.timeout, step=0.5)
            outcome.drain_s = time.monotonic() - started
            await disrupting
            everything = await wait_until(
                lambda: _archived_all(client, watch, plan.n), plan.timeout, step=SAMPLE_SECONDS
            )
            if prometheus and outcome.alert_fired_s is not None:
                await wait_until(lambda: _cleared(outcome), plan.timeout, step=SAMPLE_SECONDS)
            stop.set()
            await watching
        if not (drained and everything):
            outcome.notes.append("not drained and archived within the timeout: stopped waiting")
        await compare(client, pool, ops, outcome)
        outcome.tail_memory = per_operation(await used_memory(client), baseline, plan.n)
        if plan.memory:
            await after_the_tail(client, ops, baseline, plan, outcome)


async def _drained(client: Redis) -> bool:
    return await live_count(client) == 0


async def _archived_all(client: Redis, watch: Watch, n: int) -> bool:
    """Every operation archived, its delivery observed and nothing left on the streams (an
    event after the archive puts the operation back on them: apply_delivery.lua)."""
    return watch.count >= n and not await observing(client) and not await settled_waiting(client)


async def _cleared(outcome: Outcome) -> bool:
    return outcome.alert_cleared_s is not None


@asynccontextmanager
async def prometheus_for(
    plan: Plan, outcome: Outcome, archiver: ServiceProcess
) -> AsyncIterator[PrometheusServer | None]:
    """A real Prometheus scraping the archiver with the scaled ArchiveLagHigh rule: a quarter
    of the outage behind, held for a tenth of it (at least 2 s and 1 s)."""
    if not plan.prometheus:
        yield None
        return
    threshold, hold = max(2, round(plan.outage_s / 4)), max(1, round(plan.outage_s / 10))
    directory = Path(tempfile.mkdtemp(prefix="rg-archive-rules-"))
    rules = scaled_rule(directory, threshold, hold)
    outcome.alert_rule = f"{ALERT} threshold {threshold} s, for {hold} s"
    # The archiver's metrics port is kept across its restart (ServiceProcess.restart).
    async with PrometheusServer(
        {"archiver": [f"127.0.0.1:{archiver.metrics_port}"]}, rules_file=rules
    ) as prometheus:
        await prometheus.wait_for_scrapes(timeout=60)
        yield prometheus


async def after_the_tail(
    client: Redis, ops: list[str], baseline: tuple[int, int], plan: Plan, outcome: Outcome
) -> None:
    """Wait until Redis has let every operation go and the poller's housekeeping has dropped
    their message-map entries, then measure what is left."""

    async def gone() -> bool:
        if await held(client, ops):
            return False
        async with client.pipeline(transaction=False) as pipe:
            for p in range(PARTITIONS):
                pipe.hlen(PartitionKeys(p).messages)
            return sum(await pipe.execute()) == 0

    if not await wait_until(gone, plan.tail_s + plan.timeout, step=2.0):
        outcome.notes.append("some operations were still in Redis when memory was measured")
    outcome.after_memory = per_operation(await used_memory(client), baseline, plan.n)
    outcome.left = await key_shapes(client)


def report(out: Outcome) -> None:
    plan = out.plan
    print(
        f"== archive storm: N={plan.n}, R={plan.rate:g}/s, {SCENARIO.what}; archiver tail "
        f"{plan.tail_s} s" + "".join(f", {k}={v}" for k, v in plan.archiver_env.items())
    )
    print(
        f"   drained in {out.drain_s:.1f} s; archived {out.operations} rows for "
        f"{out.distinct} operations, {out.attempt_rows} attempt rows (Redis ledgers: "
        f"{out.ledger_rows}), {out.event_rows} delivery event rows"
    )
    print(
        f"   compared with Redis (hash, ledger, delivery): {len(out.mismatched)} differ, "
        f"{out.not_compared} gone before compared"
        + (f": {out.mismatched[:5]}" if out.mismatched else "")
    )
    p50, p99, worst = out.lag_ms
    print(
        f"   archive lag per operation (settled in Redis -> archive transaction): p50 "
        f"{p50:.0f} ms, p99 {p99:.0f} ms, max {worst:.0f} ms; lag gauge highest "
        f"{out.gauge_max:.1f} s"
    )
    if out.killed_holding >= 0:
        print(
            f"   archiver SIGKILLed holding {out.killed_holding} entries read and not "
            "acknowledged, started again"
        )
    if plan.outage_s:
        stopped, started = out.outage
        print(
            f"   PostgreSQL stopped for {started - stopped:.1f} s (--pg-outage {plan.outage_s:g})"
            f" once {plan.n // 4} were archived"
        )
    if out.alert_rule:
        fired = (
            "never" if out.alert_fired_s is None else f"{out.alert_fired_s:.1f} s after the stop"
        )
        cleared = (
            "never"
            if out.alert_cleared_s is None
            else f"{out.alert_cleared_s:.1f} s after the start"
        )
        print(
            f"   real Prometheus, chart rule scaled ({out.alert_rule}): active before the "
            f"outage: {out.alert_before}; fired {fired}; cleared {cleared}"
        )
    print(
        "   Redis memory per operation, used_memory (keyspace part): during the tail "
        f"{out.tail_memory[0]:.0f} B ({out.tail_memory[1]:.0f} B)"
        + (
            f"; after it {out.after_memory[0]:.0f} B ({out.after_memory[1]:.0f} B)"
            if plan.memory
            else ""
        )
    )
    for line in out.left:
        print(f"     left: {line}")
    for note in out.notes:
        print(f"   note: {note}")
    print(f"   {'WHOLE' if out.whole else 'NOT WHOLE'}")
    shown = {
        "archived / differ from Redis": f"{out.distinct:,} / {len(out.mismatched)}",
        "archive lag p99": f"{p99:.0f} ms",
    }
    if plan.memory:
        shown["Redis per operation after the tail"] = f"{out.after_memory[0]:.0f} B"
    if out.alert_rule:
        shown["lag alert"] = f"fired {fired}, cleared {cleared}"
    figures.emit(shown)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("-n", type=int, default=Plan.n, help="operations (default 10000)")
    parser.add_argument("--rate", type=float, default=Plan.rate, help="provider sends/s (200)")
    parser.add_argument(
        "--tail",
        type=int,
        default=Plan.tail_s,
        metavar="SECONDS",
        help="RESETGATE_ARCHIVE_TAIL_SECONDS (600: the comparison ends first)",
    )
    parser.add_argument(
        "--pg-outage",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="stop PostgreSQL this long once a quarter is archived",
    )
    parser.add_argument(
        "--kill-archiver",
        action="store_true",
        help="SIGKILL the archiver mid-batch (early in the outage), then start it",
    )
    parser.add_argument(
        "--prometheus",
        action="store_true",
        help="a real Prometheus evaluating the scaled ArchiveLagHigh rule",
    )
    parser.add_argument("--no-memory", action="store_true", help="do not wait out the tail")
    args = parser.parse_args()
    plan = Plan(
        n=args.n,
        rate=args.rate,
        tail_s=args.tail,
        outage_s=args.pg_outage,
        kill=args.kill_archiver,
        prometheus=args.prometheus,
        memory=not args.no_memory,
    )
    outcome = asyncio.run(storm(plan))
    report(outcome)
    raise SystemExit(0 if outcome.whole else 1)


if __name__ == "__main__":
    main()

"""Benchmark: the account history's archive query with 1,000,000 archived operations.

    .venv/bin/python benchmarks/archive_history.py [--operations 1000000] [--accounts 100000]
                                                   [--months 12] [--queries 2000]

Starts a local PostgreSQL (services/ctl/localpg.py), migrates it, creates one partition per
month and loads ``--operations`` operations spread evenly over ``--months`` months and
``--accounts`` accounts (an insert from generate_series, each with a hash shaped like a real
one), then ANALYZEs and runs ``--queries`` account histories (shared.archive.account_history,
``since`` 90 days back, the query GET .../accounts/{id}/recovery-operations runs) for random
accounts, one at a time through the pool, and prints p50, p99 and max. It prints figures and
checks nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from datetime import UTC, datetime, timedelta

import asyncpg

from benchmarks import figures
from services.ctl.embedded import free_port
from services.ctl.localpg import LocalPostgres
from shared import archive_schema as schema
from shared.archive import account_history
from shared.clock import from_datetime

LOAD = """
INSERT INTO operations (settled_at, operation_id, account_id, created_at, state, provider,
                        provider_message_id, reason, hash)
SELECT t, 'op-' || (i % 16) || '-' || lpad(i::text, 26, '0'), 'acct-' || (i % $2), t,
       'accepted', 'http', 'msg_' || i, 'accepted',
       jsonb_build_object('account_id', 'acct-' || (i % $2), 'state', 'accepted',
                          'settled_at', (extract(epoch FROM t) * 1000)::bigint::text,
                          'attempts', '1', 'provider', 'http', 'provider_message_id', 'msg_' || i,
                          'token_kid', 'k1', 'delivery', 'delivered')
FROM (SELECT i, $3::timestamptz + (i::double precision / $1) * ($4::timestamptz - $3::timestamptz)
      AS t FROM generate_series(1, $1) AS i) AS g
"""


async def load(dsn: str, operations: int, accounts: int, months: int, now: datetime) -> float:
    conn = await asyncpg.connect(dsn)
    try:
        await schema.migrate(conn)
        first = schema.month_of(now - timedelta(days=31 * (months - 1)))
        month = first
        while month <= schema.month_of(now):
            await schema.ensure_month(conn, month)
            month = schema.next_month(month)
        started = time.monotonic()
        await conn.execute(LOAD, operations, accounts, first, now, timeout=3600)
        await conn.execute("ANALYZE operations", timeout=600)
        return time.monotonic() - started
    finally:
        await conn.close()


async def query(dsn: str, accounts: int, queries: int, now: datetime) -> list[float]:
    since = from_datetime(now - timedelta(days=90))
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
    timings = []
    try:
        for _ in range(queries):
            account = f"acct-{random.randrange(accounts)}"
            started = time.perf_counter()
            await account_history(pool, account, since, 100)
            timings.append((time.perf_counter() - started) * 1000)
    finally:
        await pool.close()
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1] if __doc__ else None)
    parser.add_argument("--operations", type=int, default=1_000_000)
    parser.add_argument("--accounts", type=int, default=100_000)
    parser.add_argument("--months", type=int, default=12)
    parser.add_argument("--queries", type=int, default=2000)
    args = parser.parse_args()
    now = datetime.now(UTC)
    server = LocalPostgres(free_port()).start()
    try:
        loaded = asyncio.run(load(server.dsn, args.operations, args.accounts, args.months, now))
        print(
            f"loaded {args.operations:,} operations ({args.accounts:,} accounts, "
            f"{args.months} monthly partitions) in {loaded:.0f} s"
        )
        timings = sorted(asyncio.run(query(server.dsn, args.accounts, args.queries, now)))
    finally:
        server.close()
    p99 = timings[int(len(timings) * 0.99) - 1]
    p50 = statistics.median(timings)
    figures.emit(
        {
            "archived operations": f"{args.operations:,}",
            "account history p50 / p99": f"{p50:.2f} ms / {p99:.2f} ms",
        }
    )
    print(
        f"account history, since 90 days, {args.queries} queries: p50 {p50:.2f} ms, "
        f"p99 {p99:.2f} ms, max {timings[-1]:.2f} ms"
    )


if __name__ == "__main__":
    main()

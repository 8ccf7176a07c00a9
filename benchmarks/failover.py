"""The failover storm: a primary that answers 429 with no stated wait to every send from
10 s on (for 600 s), a standby beside it, and the preapproved failover policy on or off.

Real processes: a redis-server, two sandboxes (``primary`` at --primary-rate, ``standby`` at
--standby-rate sends/s; each one's ceiling, RESETGATE_PROVIDER_<NAME>_MAX_RATE, is its
rate), admission, the poller and 2 senders. N operations are admitted in a burst at 0 s;
at 10 s the primary's 429s begin (RESETGATE_SANDBOX_SEND_BLACKOUT_SECONDS, set then, with
no Retry-After). Settings a deployment would keep longer are shortened to keep the run to
minutes (printed): RESETGATE_FAILOVER_AFTER_SECONDS and RESETGATE_PROGRESSIVE_WINDOW_SECONDS.

Policy on (RESETGATE_FAILOVER_PRIMARY=standby), it reports and judges: when the failover
started after the outage began (target: within FAILOVER_AFTER + 2 policy looks), whether it
widened to every partition, the drain time against 1.15 x (10 s + the rest at the standby's
rate), duplicates and lost across both providers (by the sandboxes' own counts), and the
page (resetgate_failover_partitions on the senders, one policy request in the trail).
Policy off: after FAILOVER_AFTER + 3 windows, nothing has moved.

    .venv/bin/python benchmarks/failover.py                 # policy on, N=6000
    .venv/bin/python benchmarks/failover.py --policy off
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.storm import (
    INTERNAL_TOKEN,
    PARTITIONS,
    STARTUP_SECONDS,
    TOKEN_KEYS,
    admit_all,
    live_count,
    seed_directory,
    wait_until,
)
from services.ctl.embedded import RedisServer
from shared import control, progressive
from shared.keys import AUDIT
from tests.support.processes import Processes, ServiceProcess
from tests.support.sandbox import SANDBOX_API_KEY, configure, run_sandbox_process, sandbox_stats

NAMES = ("primary", "standby")
OUTAGE_AT = 10.0
OUTAGE_SECONDS = 600.0
POLICY_LOOK_SECONDS = 2.0  # services/sender/failover.py: POLICY_EVERY ticks of 1 s


@dataclass
class Result:
    settings: dict[str, str]
    primary_sent_before: int = 0
    started_after_outage: float | None = None
    drain_s: float | None = None
    ideal_s: float = 0.0
    moved: int = 0
    phase: str = ""
    duplicates: int = 0
    lost: int = 0
    emails: dict[str, int] = field(default_factory=dict)
    paged: list[str] = field(default_factory=list)
    requests: int = 0
    log: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def services_env(
    redis_url: str, urls: dict[str, str], ceilings: dict[str, float]
) -> dict[str, str]:
    env = {
        "RESETGATE_REDIS_URL": redis_url,
        "RESETGATE_PROVIDERS": ",".join(NAMES),
        "RESETGATE_TOKEN_KEYS": TOKEN_KEYS,
        "RESETGATE_INTERNAL_API_TOKEN": INTERNAL_TOKEN,
    }
    for name, url in urls.items():
        infix = f"RESETGATE_PROVIDER_{name.upper()}"
        env |= {
            f"{infix}_KIND": "http",
            f"{infix}_URL": url,
            f"{infix}_API_KEY": SANDBOX_API_KEY,
            f"{infix}_MAX_RATE": f"{ceilings[name]:g}",
        }
    return env


async def sent(urls: dict[str, str]) -> dict[str, dict[str, int]]:
    return {n: (await sandbox_stats(u))["sent_by_operation"] for n, u in urls.items()}


async def outage(primary_url: str, started: float, result: Result) -> None:
    await asyncio.sleep(max(0.0, started + OUTAGE_AT - time.monotonic()))
    await configure(primary_url, send_blackout_seconds=OUTAGE_SECONDS)
    result.primary_sent_before = int((await sandbox_stats(primary_url))["emails_sent_total"])


async def page(senders: list[ServiceProcess]) -> list[str]:
    """Every sender's resetgate_failover_partitions series (one, on the driver, expected)."""
    found = []
    for sender in senders:
        for line in (await sender.metrics_text()).splitlines():
            if line.startswith("resetgate_failover_partitions{"):
                found.append(f"{sender.name}: {line}")
    return found


async def policy_requests(client: Redis) -> int:
    entries: Any = await client.xrange(AUDIT)
    return sum(
        1
        for _, f in entries
        if f.get("action") == "progressive-switch"
        and f.get("result") == "requested"
        and str(f.get("actor", "")).startswith("failover-policy:")
    )


async def run(args: argparse.Namespace) -> Result:
    ceilings = {
        "primary": args.primary_rate * args.ceiling,
        "standby": args.standby_rate * args.ceiling,
    }
    policy = {"RESETGATE_FAILOVER_PRIMARY": "standby"} if args.policy == "on" else {}
    tuning = {
        "RESETGATE_FAILOVER_AFTER_SECONDS": f"{args.after:g}",
        "RESETGATE_PROGRESSIVE_WINDOW_SECONDS": f"{args.window:g}",
    }
    result = Result(
        {
            "N": str(args.n),
            "primary sends/s": f"{args.primary_rate:g}",
            "standby sends/s": f"{args.standby_rate:g}",
            "RESETGATE_PROVIDER_<NAME>_MAX_RATE": f"{args.ceiling:g} x each one's rate",
            "primary outage": f"429 without Retry-After from {OUTAGE_AT:g} s for "
            f"{OUTAGE_SECONDS:g} s",
            "senders": str(args.senders),
            **policy,
            **tuning,
        }
    )
    server = RedisServer().start()
    client = Redis.from_url(server.url, decode_responses=True)
    logs = Path(tempfile.mkdtemp(prefix="rg-failover-"))
    result.notes.append(f"service logs in {logs}")
    try:
        await seed_directory(client, args.n)
        sandbox = {"log_level": "WARNING", "delivered_delay_seconds": 0.5}
        async with (
            run_sandbox_process(
                STARTUP_SECONDS,
                send_rate_per_second=args.primary_rate,
                retry_after_form="absent",
                **sandbox,
            ) as primary_url,
            run_sandbox_process(
                STARTUP_SECONDS, send_rate_per_second=args.standby_rate, **sandbox
            ) as standby_url,
        ):
            urls = {"primary": primary_url, "standby": standby_url}
            env = {**services_env(server.url, urls, ceilings), **policy, **tuning}
            async with Processes(logs, env) as stack:
                admission = await stack.start("admission", STARTUP_SECONDS)
                await stack.start("poller", STARTUP_SECONDS)
                senders = [
                    ServiceProcess(f"sender-{i}", env, logs, module="services.sender")
                    for i in range(1, args.senders + 1)
                ]
                stack.services.update({s.name: s for s in senders})
                await asyncio.gather(*(s.start(STARTUP_SECONDS) for s in senders))
                await storm(args, client, urls, admission.url, senders, result)
    finally:
        await client.aclose()
        server.stop()
    return result


async def storm(
    args: argparse.Namespace,
    client: Redis,
    urls: dict[str, str],
    admission_url: str,
    senders: list[ServiceProcess],
    result: Result,
) -> None:
    started = time.monotonic()
    flip = asyncio.create_task(outage(urls["primary"], started, result))
    ops, _ = await admit_all([admission_url], args.n, 16)
    await flip
    outage_at = started + OUTAGE_AT
    if args.policy == "off":
        await asyncio.sleep(max(0.0, outage_at + args.after + 3 * args.window - time.monotonic()))
        plan = await progressive.read(client)
        result.phase = plan.phase if plan else "none"
        result.moved = len((await control.read(client)).providers)
        result.paged = await page(senders)
        return

    async def drained() -> bool:
        return await live_count(client) == 0

    rest = max(0, args.n - result.primary_sent_before)
    result.ideal_s = OUTAGE_AT + rest / args.standby_rate
    if await wait_until(drained, timeout=args.timeout, step=0.5):
        result.drain_s = time.monotonic() - started
    plan = await progressive.read(client)
    if plan is not None:
        result.phase, result.moved, result.log = str(plan.phase), len(plan.moved), plan.log
        # The plan's start is a wall-clock ms; the outage's is this process's monotonic.
        wall_outage = time.time() - (time.monotonic() - outage_at)
        result.started_after_outage = plan.started_at / 1000 - wall_outage
    result.paged = await page(senders)
    result.requests = await policy_requests(client)
    per_provider = await sent(urls)
    result.emails = {n: sum(per_provider[n].get(op, 0) for op in ops) for n in NAMES}
    for op in ops:
        total = sum(per_provider[n].get(op, 0) for n in NAMES)
        result.duplicates += max(0, total - 1)
        result.lost += total == 0


def report(args: argparse.Namespace, result: Result) -> bool:
    print(f"\n== failover storm, policy {args.policy}")
    for name, value in result.settings.items():
        print(f"  setting {name}: {value}")
    for note in result.notes:
        print(f"  note: {note}")
    if args.policy == "off":
        ok = result.phase == "none" and result.moved == 0 and not result.paged
        print(
            f"  after {OUTAGE_AT + args.after + 3 * args.window:g} s: progressive switch "
            f"{result.phase}, partitions moved {result.moved}, page series {result.paged}"
        )
        print(f"  VERDICT: {'met' if ok else 'NOT met'} (nothing moves)")
        return ok
    bound = 1.15 * result.ideal_s
    start_limit = args.after + 2 * POLICY_LOOK_SECONDS
    started = result.started_after_outage
    drain = result.drain_s
    paged = result.paged
    one_page = result.requests == 1 and len(paged) == 1
    checks = {
        f"failover started {started if started is None else round(started, 1)} s after the "
        f"outage (<= {start_limit:g})": started is not None and started <= start_limit,
        f"widened to every partition ({result.moved} of {PARTITIONS}, {result.phase})": (
            result.moved == PARTITIONS and result.phase == "done"
        ),
        f"drain {drain if drain is None else round(drain, 1)} s <= 1.15 x "
        f"{result.ideal_s:.1f} s = {bound:.1f} s (primary sent "
        f"{result.primary_sent_before} before the outage)": drain is not None and drain <= bound,
        f"sent twice {result.duplicates}, lost {result.lost} (emails {result.emails})": (
            result.duplicates == 0 and result.lost == 0
        ),
        f"paged once: {result.requests} policy request(s), series {paged}": (
            one_page and paged[0].rstrip().endswith(f" {float(PARTITIONS)}")
        ),
    }
    for text, ok in checks.items():
        print(f"  {'ok ' if ok else 'NOT'} {text}")
    for line in result.log:
        print(f"    | {line}")
    print(f"  VERDICT: {'met' if all(checks.values()) else 'NOT met'}")
    return all(checks.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("-n", type=int, default=6000, help="operations (default 6000)")
    parser.add_argument("--primary-rate", type=float, default=100.0)
    parser.add_argument("--standby-rate", type=float, default=20.0)
    parser.add_argument("--senders", type=int, default=2)
    parser.add_argument(
        "--ceiling",
        type=float,
        default=1.5,
        help="each provider's RESETGATE_PROVIDER_<NAME>_MAX_RATE as a multiple "
        "of its sandbox's rate (default 1.5: the pacer finds the real rate)",
    )
    parser.add_argument("--policy", choices=("on", "off"), default="on")
    parser.add_argument(
        "--after",
        type=float,
        default=10.0,
        help="RESETGATE_FAILOVER_AFTER_SECONDS (default 10; a deployment's "
        "default is a quarter of the delivery horizon)",
    )
    parser.add_argument(
        "--window",
        type=float,
        default=10.0,
        help="RESETGATE_PROGRESSIVE_WINDOW_SECONDS (default 10; 60 deployed)",
    )
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args()
    result = asyncio.run(run(args))
    sys.exit(0 if report(args, result) else 1)


if __name__ == "__main__":
    main()

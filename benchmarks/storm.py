"""The storm, in the deployment's shape: N operations admitted in a burst while the provider
allows R sends/s, drained by the real senders and poller.

Real processes, each with its default settings except the ones a scenario names (printed):
a redis-server, the sandbox provider, 2 `services.admission` replicas (jobs are admitted
through their internal API by 64 concurrent clients, for a directory of N accounts), the
`services.poller`, and 2 (`--senders 4`) `services.sender`. `--provider KIND` runs the sandbox
as that provider (RESETGATE_SANDBOX_MODE) and the services with RESETGATE_PROVIDER_KIND=KIND;
a provider that pushes delivery events (SendGrid, Mailgun, Postmark) has the sandbox POST them,
signed, to the poller's webhook listener, as a deployment is wired (tests/support/webhooks.py).
`--key-retention SECONDS` sets how long the provider keeps an idempotency key, one value for
the sandbox and the services. The clock starts at the first
admission and stops when every operation is terminal. Per scenario it prints drain time,
ideal time, sends and 429s, duplicates and lost (by the sandbox and by the store), sender
CPU per 1,000 emails (from /proc) and Redis memory per accepted and per queued operation.

    .venv/bin/python benchmarks/storm.py --all                       # N=10000, R=200
    .venv/bin/python benchmarks/storm.py --scenario ceiling-1.5 -n 2000
    .venv/bin/python benchmarks/storm.py --scenario restart --senders 4
    .venv/bin/python benchmarks/storm.py --scenario drop -n 2000 --key-retention 1
    .venv/bin/python benchmarks/storm.py --scenario drop --provider sendgrid -n 2000
    .venv/bin/python benchmarks/storm.py --scenario drop --provider postmark --search-delay 30
    .venv/bin/python benchmarks/storm.py --scenario ceiling-1.5 --provider ses -n 300
    .venv/bin/python benchmarks/storm.py --scenario slow-1 -n 120        # 1 send/s, burst 1
    .venv/bin/python benchmarks/storm.py --scenario slow-0.2 -n 30       # 0.2 send/s, burst 1
    .venv/bin/python benchmarks/storm.py --scenario blackout -n 120      # 600 s of 429s
    .venv/bin/python benchmarks/storm.py --scenario incident -n 400 --outage 90  # then 20/s
    .venv/bin/python benchmarks/storm.py --scenario quota --provider ses -n 250  # quota 200
    .venv/bin/python benchmarks/storm.py --scenario ceiling-1.0 --profile /tmp/rg-prof  # py-spy
    .venv/bin/python benchmarks/storm.py --scenario ceiling-1.0 --traces  # traces unset, then on
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
from redis.asyncio import Redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import figures, storm_moto
from benchmarks import storm_audit as audit
from benchmarks.storm_profile import Profiler
from benchmarks.storm_report import (
    ADMISSION_CLIENTS,
    KEY_RETENTION,
    SCENARIOS,
    Run,
    ceiling,
    ideal_seconds,
    quota_ideal,
    report,
    sandbox_overrides,
    summary,
)
from benchmarks.storm_timeline import Timeline
from services.ctl.embedded import RedisServer, free_port
from services.sandbox.dialects import DIALECTS
from shared import keys
from shared.providers.registry import KINDS, keyless
from shared.settings import PolicySettings
from tests.support.otlp import OtlpReceiver
from tests.support.processes import Processes, ServiceProcess
from tests.support.sandbox import SANDBOX_API_KEY, run_sandbox_process, sandbox_stats
from tests.support.webhooks import poller_credentials, pushes_events, sandbox_webhooks

TOKEN_KEYS = "storm:storm-benchmark-secret-0123456789"
INTERNAL_TOKEN = "storm-internal-token-0123456789"
PARTITIONS = PolicySettings.model_fields["partitions"].default
STARTUP_SECONDS = 90.0  # a loaded machine starts a Python service slowly
SETTLE_SECONDS = 60.0  # after the drain: let the poller record delivery before measuring
MAILGUN_DOMAIN = "storm.mailgun.test"  # the sandbox's Mailgun mode takes any domain
# An admission answer that a retry can fix (503: the store was slow to answer on a loaded
# machine) is retried after its Retry-After, as a client would; at most this many times.
ADMISSION_RETRIES = 5
FIRST_SEND_POLL_SECONDS = 0.02
SANDBOX_NICE = -20  # the highest priority: the provider is not on our machine


class SenderFleet:
    """The sender processes and the CPU they spent since the storm began."""

    def __init__(self, stack: Processes, env: dict[str, str], count: int) -> None:
        self.senders = [
            ServiceProcess(f"sender-{i}", env, stack.log_dir, module="services.sender")
            for i in range(1, count + 1)
        ]
        for sender in self.senders:
            stack.services[sender.name] = sender
        self.baseline: dict[int, float] = {}
        self.spent = 0.0  # by processes that have exited

    async def start(self) -> None:
        """Start every sender; each one's CPU counts from the moment it is ready."""

        async def one(sender: ServiceProcess) -> None:
            await sender.start(STARTUP_SECONDS)
            assert sender.process is not None
            self.baseline[sender.process.pid] = audit.cpu_seconds(sender.process.pid)

        await asyncio.gather(*(one(s) for s in self.senders))

    def begin(self) -> None:
        """The storm begins: start-up CPU so far is not the storm's."""
        self.baseline = {pid: audit.cpu_seconds(pid) for pid in self.pids()}

    def pids(self) -> list[int]:
        return [s.process.pid for s in self.senders if s.running and s.process]

    async def restart_one_by_one(self) -> None:
        for sender in self.senders:
            assert sender.process is not None
            pid, before = sender.process.pid, audit.reaped_children_cpu()
            await sender.stop()
            self.spent += audit.reaped_children_cpu() - before - self.baseline.pop(pid, 0.0)
            await sender.start(STARTUP_SECONDS)
            assert sender.process is not None
            self.baseline[sender.process.pid] = audit.cpu_seconds(sender.process.pid)

    def cpu(self) -> float:
        running = sum(audit.cpu_seconds(p) - self.baseline.get(p, 0.0) for p in self.pids())
        return self.spent + running


def service_env(redis_url: str, provider_url: str, kind: str) -> dict[str, str]:
    """Wiring only (where things are, which provider, secrets): every behaviour setting is
    the default."""
    env = {
        "RESETGATE_REDIS_URL": redis_url,
        "RESETGATE_PROVIDER_KIND": kind,
        "RESETGATE_PROVIDER_NAME": kind,
        "RESETGATE_PROVIDER_URL": provider_url,
        "RESETGATE_PROVIDER_API_KEY": SANDBOX_API_KEY,
        "RESETGATE_TOKEN_KEYS": TOKEN_KEYS,
        "RESETGATE_INTERNAL_API_TOKEN": INTERNAL_TOKEN,
    }
    if kind == "mailgun":
        env["RESETGATE_MAILGUN_DOMAIN"] = MAILGUN_DOMAIN
    if kind == "ses":
        env.update(storm_moto.AWS_ENV)
    return env


def quota_env(run: Run) -> dict[str, str]:
    """The daily quota's window for the services, when the scenario shortens it."""
    if not run.scenario.quota_window:
        return {}
    return {"RESETGATE_QUOTA_WINDOW_SECONDS": str(run.scenario.quota_window)}


def retention_env(run: Run) -> dict[str, str]:
    """--key-retention for the services, when it is not the default (the sandbox gets the
    same value through ``sandbox_overrides``)."""
    if run.key_retention == KEY_RETENTION:
        return {}
    return {"RESETGATE_IDEMPOTENCY_WINDOW_SECONDS": str(run.key_retention)}


async def webhook_listener(kind: str, port: int, provider_url: str) -> dict[str, str]:
    """The poller's webhook listener on ``port``, holding the credential that accepts what
    the sandbox signs; nothing for a provider that pushes no events (port 0)."""
    if not port:
        return {}
    return {"RESETGATE_WEBHOOK_PORT": str(port), **await poller_credentials(kind, provider_url)}


def first_claim_on_the_cpu(module: str) -> str:
    """Run our child ``python -m module`` (the provider's stand-in) ahead of every other
    process: a real provider does not share our cores, and one that is not scheduled reads
    on-time requests late and refuses them. Needs CAP_SYS_NICE (root); says what it did."""
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError):
            continue
        if int(stat[1]) == os.getpid() and module.encode() in command:
            try:
                os.setpriority(os.PRIO_PROCESS, int(entry.name), SANDBOX_NICE)
            except PermissionError:
                return f"{module} at the benchmark's own priority (nice {os.nice(0)})"
            return f"{module} at nice {SANDBOX_NICE}, the others at {os.nice(0)}"
    return f"{module}: not found among this process's children (priority unchanged)"


def send_route(kind: str) -> str:
    """The sandbox's stats key for sends in this provider's mode."""
    path = DIALECTS[kind].send_path if kind in DIALECTS else "/email/send"
    return f"POST {path}"


async def seed_directory(client: Redis, n: int) -> None:
    async with client.pipeline(transaction=False) as pipe:
        for i in range(n):
            pipe.hset(keys.directory_account(f"storm-{i}"), mapping={"email": f"p{i}@example.com"})
        await pipe.execute()


async def admit_one(
    session: aiohttp.ClientSession, url: str, body: dict[str, str]
) -> tuple[str, int]:
    """POST one admission; returns its operation id and how many 503s were retried first."""
    headers = {"Authorization": f"Bearer {INTERNAL_TOKEN}"}
    for retries in range(ADMISSION_RETRIES + 1):
        async with session.post(url, json=body, headers=headers) as response:
            reply = await response.json()
            if response.status == 201:
                return str(reply["operation_id"]), retries
            if response.status != 503 or retries == ADMISSION_RETRIES:
                raise RuntimeError(f"admission answered {response.status}: {reply}")
            wait = float(response.headers.get("Retry-After", "1"))
        await asyncio.sleep(wait)
    raise AssertionError("unreachable")


async def admit_all(base_urls: list[str], n: int, clients: int) -> tuple[list[str], int]:
    """POST every account to the internal API from ``clients`` concurrent clients, spread
    over the admission replicas; returns the operation ids and the 503s retried."""
    ops = [""] * n
    retried = [0]
    accounts = iter(range(n))

    async def client(session: aiohttp.ClientSession, base_url: str) -> None:
        url = f"{base_url}/internal/v1/recovery-operations"
        for i in accounts:  # shared: each client takes the next account
            body = {"account_id": f"storm-{i}", "entry_point": "automation", "actor": "storm"}
            ops[i], retries = await admit_one(session, url, body)
            retried[0] += retries

    timeout = aiohttp.ClientTimeout(total=30)
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        await asyncio.gather(
            *(client(session, base_urls[i % len(base_urls)]) for i in range(clients))
        )
    return ops, retried[0]


async def live_count(client: Redis) -> int:
    """Operations not yet terminal: the live index, 16 commands instead of N."""
    async with client.pipeline(transaction=False) as pipe:
        for p in range(PARTITIONS):
            pipe.zcard(keys.PartitionKeys(p).live)
        return int(sum(await pipe.execute()))


async def wait_until(check: Any, timeout: float, step: float = 0.1) -> bool:
    """Poll ``check()`` until true or ``timeout`` seconds passed (bounded, always returns)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await check():
            return True
        await asyncio.sleep(step)
    return False


async def queued_sample(client: Redis, ops: list[str], limit: int = 500) -> list[str]:
    """Up to ``limit`` of ``ops`` still queued (newest first: the last admitted wait longest)."""
    sample: list[str] = []
    for op in reversed(ops):
        if await client.hget(keys.PartitionKeys.of(op).operation(op), "state") == "queued":
            sample.append(op)
            if len(sample) == limit:
                break
    return sample


class Storm:
    def __init__(
        self,
        run: Run,
        client: Redis,
        timeout: float,
        provider_url: str,
        profiler: Profiler | None = None,
    ) -> None:
        self.run = run
        self.profiler = profiler
        self.client = client
        self.timeout = timeout
        self.provider_url = provider_url
        self.ops: list[str] = []
        self.empty_streams = 0  # bytes of the send streams and live indexes before the storm
        self.timeline = Timeline(client, provider_url, run.provider, send_route(run.provider))

    async def admit(self, admission_urls: list[str]) -> None:
        started = time.monotonic()
        self.ops, retried = await admit_all(admission_urls, self.run.n, ADMISSION_CLIENTS)
        self.run.admitted_s = time.monotonic() - started
        if retried:
            self.run.notes.append(f"admission answered 503 {retried} times (retried)")
        sample = await queued_sample(self.client, self.ops)
        self.run.queued_memory = await audit.memory_per_operation(
            self.client, sample, PARTITIONS, queued=True, baseline=self.empty_streams
        )

    async def drained(self) -> bool:
        return len(self.ops) == self.run.n and await live_count(self.client) == 0

    async def storm(self, admission_urls: list[str], fleet: SenderFleet) -> None:
        """During: the senders are up and the clock starts at the first admission. Ahead: the
        N are admitted first, then the senders started; the clock starts at the first send."""
        run = self.run
        admitting: asyncio.Task[None] | None = None
        if run.admit_ahead:
            await self.admit(admission_urls)
            first_send = asyncio.create_task(self.first_send())
            await fleet.start()
            started = await first_send
        else:
            await fleet.start()
            fleet.begin()
            started = time.monotonic()
            admitting = asyncio.create_task(self.admit(admission_urls))
        load_at_start = os.getloadavg()[0]
        if self.profiler:
            self.profiler.start(fleet.pids())
        restarting = asyncio.create_task(self.restarts(fleet)) if run.scenario.restart else None
        outage = asyncio.create_task(self.outage()) if run.scenario.blackout else None
        stop_sampling = asyncio.Event()
        # The timeline reads the sandbox's counters; moto (SES) has none to read.
        sampling = asyncio.create_task(
            self.timeline.run(started, self.live, lambda: os.getloadavg()[0], stop_sampling)
            if run.provider != "ses"
            else stop_sampling.wait()
        )
        done = await wait_until(self.drained, self.timeout)
        run.drain_s = time.monotonic() - started if done else math.nan
        run.cpu_s = fleet.cpu()
        run.load = (load_at_start, os.getloadavg()[0])
        if self.profiler:
            run.profile = await asyncio.to_thread(self.profiler.stop)
        stop_sampling.set()
        if not done:
            run.notes.append(f"not drained within {self.timeout:.0f} s: stopped waiting")
        tasks = [t for t in (admitting, restarting, outage) if t is not None]
        for task in tasks:
            if not task.done():
                task.cancel()
        await asyncio.gather(sampling, *tasks, return_exceptions=True)
        if restarting is not None and not restarting.cancelled() and restarting.exception():
            run.notes.append(f"a restart failed: {restarting.exception()!r}")
        if admitting and admitting.done() and not admitting.cancelled() and admitting.exception():
            raise admitting.exception()  # type: ignore[misc]

    async def live(self) -> int:
        return await live_count(self.client) if len(self.ops) == self.run.n else self.run.n

    async def first_send(self) -> float:
        """The last moment the sandbox had answered no send (the clock's start, never late);
        for SES on moto, which counts nothing we can poll, the moment the senders start."""
        if self.run.provider == "ses":
            return time.monotonic()
        route = send_route(self.run.provider)
        while True:
            before = time.monotonic()
            stats = await sandbox_stats(self.provider_url, operation_id="storm-first-send")
            if stats["requests_by_route"].get(route, 0):
                return before
            await asyncio.sleep(FIRST_SEND_POLL_SECONDS)

    async def outage(self) -> None:
        """The 429s the sandbox answered during its blackout (it starts at the first send)."""
        await self.first_send()
        await asyncio.sleep(self.run.scenario.blackout)
        stats = await sandbox_stats(self.provider_url)
        self.run.outage_throttled = int(stats["send_throttled_total"])

    async def restarts(self, fleet: SenderFleet) -> None:
        delay = 0.2 * self.run.ideal_s
        self.run.notes.append(f"senders restarted one by one from {delay:.1f} s into the storm")
        await asyncio.sleep(delay)
        begun = time.monotonic()
        await fleet.restart_one_by_one()
        self.run.notes.append(f"restarts took {time.monotonic() - begun:.1f} s")

    async def settle(self) -> None:
        """Wait (bounded) until the poller has seen a definitive event for every acceptance."""

        async def observed() -> bool:
            async with self.client.pipeline(transaction=False) as pipe:
                for p in range(PARTITIONS):
                    pipe.zcard(keys.PartitionKeys(p).observe)
                return sum(await pipe.execute()) == 0

        if not await wait_until(observed, SETTLE_SECONDS, step=0.5):
            self.run.notes.append("some deliveries not yet observed when memory was measured")

    async def audit(self) -> None:
        if self.run.provider == "ses":
            return await self.audit_moto(self.provider_url)
        run = self.run
        stats = await sandbox_stats(self.provider_url)
        run.sends = stats["requests_by_route"].get(send_route(run.provider), 0)
        run.throttled = stats["send_throttled_total"]
        # Older sandboxes (another checkout's) do not count their own stalls.
        run.throttled_after_stall = stats.get("send_throttled_after_stall_total", 0)
        run.sandbox_stalls = (
            stats.get("loop_stalls_total", 0),
            stats.get("longest_stall_ms", 0),
            stats.get("stalled_ms_total", 0),
        )
        run.dropped = stats["dropped_connections_total"]
        run.emails = stats["emails_sent_total"]
        if pushes_events(run.provider):
            run.notes.append(f"webhooks pushed to the poller: {stats['webhooks']}")
        run.sandbox_duplicates, run.sandbox_lost = audit.sandbox_counts(stats, self.ops)
        run.store = await audit.store_counts(self.client, self.ops)
        self.note_ambiguous()
        await self.settle()
        run.accepted_memory = await audit.memory_per_operation(
            self.client, run.store.one_attempt, PARTITIONS, queued=False
        )

    def note_ambiguous(self) -> None:
        """The store's "lost" counts every operation not accepted; an ambiguous one is
        waiting (for a lookup, an event, or the window to close and ``review``)."""
        waiting = self.run.store.states.get("ambiguous", 0)
        if waiting:
            self.run.notes.append(
                f"{waiting} ambiguous at the end (in the store's lost): waiting for a lookup "
                "or a delivery event, else review when the observation window closes"
            )

    async def audit_moto(self, moto_url: str) -> None:
        """SES on moto: sends and per-operation emails by recipient (moto drops tags)."""
        run = self.run
        addresses = [f"p{i}@example.com" for i in range(run.n)]  # seed_directory's
        run.sends, run.sandbox_duplicates, run.sandbox_lost = await storm_moto.sent(
            moto_url, addresses
        )
        run.emails = run.sends  # moto records a message only when it accepts the send
        run.store = await audit.store_counts(self.client, self.ops)
        run.notes.append("SES on moto: no throttling, no faults; sends counted by moto")
        await self.settle()
        run.accepted_memory = await audit.memory_per_operation(
            self.client, run.store.one_attempt, PARTITIONS, queued=False
        )


@asynccontextmanager
async def provider_endpoint(run: Run, sandbox: dict[str, Any]) -> AsyncIterator[str]:
    """The sandbox in the run's provider mode, or moto for SES (whose quota is the rate)."""
    if run.provider != "ses":
        async with run_sandbox_process(STARTUP_SECONDS, **sandbox, log_level="WARNING") as url:
            run.notes.append(first_claim_on_the_cpu("services.sandbox"))
            yield url
        return
    async with storm_moto.moto_server(STARTUP_SECONDS) as url:
        run.rate = await storm_moto.max_send_rate(url)
        run.ideal_s = ideal_seconds(run.n, run.rate, run.scenario.schedule)
        run.settings = {**ceiling(run.scenario, run.rate), "moto MaxSendRate": f"{run.rate:g}"}
        if run.scenario.quota_window:
            quota = await storm_moto.daily_quota(url)
            run.ideal_s = quota_ideal(run.n, run.rate, quota, run.scenario.quota_window)
            run.settings.update({"moto Max24HourSend": str(quota), **quota_env(run)})
        yield url


async def storm(
    run: Run,
    timeout: float,
    timeline: bool = False,
    profile: Path | None = None,
    traces: bool = False,
) -> Run:
    """``traces``: every service exports its spans at sampling 1.0 to an OTLP/HTTP receiver
    the benchmark runs (tests/support/otlp.py), to measure what tracing costs."""
    async with AsyncExitStack() as exits:
        otel: dict[str, str] = {}
        if traces:
            receiver = await exits.enter_async_context(OtlpReceiver())
            otel = {
                "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
                "OTEL_TRACES_SAMPLER": "always_on",
            }
            run.notes.append("traces on: OTLP/HTTP export at sampling 1.0")
        return await _storm(run, timeout, timeline, otel, profile)


async def _storm(
    run: Run, timeout: float, timeline: bool, otel: dict[str, str], profile: Path | None
) -> Run:
    scenario = run.scenario
    sandbox = {**sandbox_overrides(scenario, run.rate, run.key_retention), "mode": run.provider}
    if run.search_delay:
        sandbox["search_delay_seconds"] = run.search_delay
    run.settings = {
        **ceiling(scenario, run.rate),
        **retention_env(run),
        **{f"sandbox {k}": str(v) for k, v in sandbox.items()},
    }
    # Wiring, not a behaviour setting (so not printed): where the sandbox pushes its events.
    hook_port = free_port() if pushes_events(run.provider) else 0
    if hook_port:
        sandbox.update(sandbox_webhooks(run.provider, hook_port))
    run.ideal_s = ideal_seconds(run.n, run.rate, scenario.schedule, scenario.blackout)
    # Without an idempotency key the sender needs appendfsync always (it refuses otherwise).
    server = RedisServer(appendonly=keyless(run.provider), appendfsync="always").start()
    client = Redis.from_url(server.url, decode_responses=True)
    try:
        await seed_directory(client, run.n)
        async with provider_endpoint(run, sandbox) as provider_url:
            sender_env = ceiling(scenario, run.rate)
            env = {
                **service_env(server.url, provider_url, run.provider),
                **retention_env(run),
                **quota_env(run),
                **otel,
            }
            logs = Path(tempfile.mkdtemp(prefix=f"rg-storm-{scenario.name}-"))
            run.notes.append(f"service logs in {logs}")
            async with Processes(logs, env) as stack:
                admissions = [
                    ServiceProcess(f"admission-{i}", env, logs, module="services.admission")
                    for i in range(1, run.admissions + 1)
                ]
                stack.services.update({a.name: a for a in admissions})
                await asyncio.gather(*(a.start(STARTUP_SECONDS) for a in admissions))
                hooks = await webhook_listener(run.provider, hook_port, provider_url)
                await stack.start("poller", STARTUP_SECONDS, **hooks)
                fleet = SenderFleet(stack, {**env, **sender_env}, run.senders)
                # Known only now for SES (moto's quota): 5 x ideal, at least 120 s.
                timeout = timeout or max(120.0, 5 * run.ideal_s)
                profiler = Profiler(profile) if profile else None
                work = Storm(run, client, timeout, provider_url, profiler)
                work.empty_streams = await audit.shared_memory(
                    client, PARTITIONS, audit.QUEUED_SHARED
                )
                await work.storm([a.url for a in admissions], fleet)
                await work.audit()
                run.notes.append(await audit.reconciliations(stack["poller"]))
                if timeline:
                    run.timeline = work.timeline.lines()
                    if not scenario.schedule and not scenario.blackout:
                        run.timeline.append(work.timeline.losses(run.rate, run.drain_s))
    finally:
        await client.aclose()
        server.stop()
    return run


def run_scenario(name: str, args: argparse.Namespace, traces: bool = False) -> Run | None:
    scenario = SCENARIOS[name]
    if name == "incident" and args.outage is not None:
        scenario = replace(
            scenario, blackout=args.outage, what=scenario.what.replace("S s", f"{args.outage:g} s")
        )
    if traces:
        scenario = replace(scenario, name=f"{name}+traces")
    run = Run(
        scenario,
        args.n,
        SCENARIOS[name].rate or args.rate,
        args.senders,
        args.admissions,
        provider=args.provider,
        admit_ahead=args.admit == "ahead",
        key_retention=args.key_retention,
        search_delay=args.search_delay,
    )
    if args.provider == "ses" and name not in storm_moto.SCENARIOS:
        print(f"\n== {name}: SKIPPED: moto injects no faults and follows no schedule")
        return None
    if args.provider != "ses" and SCENARIOS[name].quota_window:
        print(f"\n== {name}: SKIPPED: a daily quota is SES's (--provider ses)")
        return None
    return asyncio.run(storm(run, args.timeout, args.timeline, args.profile, traces))


def traces_off_and_on(name: str, args: argparse.Namespace) -> list[Run]:
    """``--traces``: the scenario with traces unset, then on at sampling 1.0, each reported,
    then what tracing costs the senders on one ``figures:`` line (make bench's)."""
    pair = []
    for traces in (False, True):
        run = run_scenario(name, args, traces)
        if run is None:
            return pair
        report(run)
        pair.append(run)
    if pair:
        off, on = (run.cpu_per_1000 for run in pair)
        figures.emit(
            {
                "sender CPU-s per 1,000 emails, traces unset": f"{off:.2f}",
                "traces on, sampling 1.0": f"{on:.2f}",
                "on / unset": f"{on / off:.2f} x",
                "load average at the starts": " / ".join(f"{run.load[0]:.1f}" for run in pair),
            }
        )
    return pair


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("-n", type=int, default=10_000, help="operations (default 10000)")
    parser.add_argument("--rate", type=float, default=200.0, help="provider sends/s (200)")
    parser.add_argument("--senders", type=int, default=2, help="sender processes (2)")
    parser.add_argument("--admissions", type=int, default=2, help="admission processes (2)")
    parser.add_argument(
        "--provider",
        default="http",
        choices=sorted(KINDS),
        help="the API the sandbox and the services speak (default http; ses: on moto, "
        "at moto's 1 send/s quota; see benchmarks/storm_moto.py)",
    )
    parser.add_argument(
        "--admit",
        choices=("during", "ahead"),
        default="during",
        help="during: senders up, clock from the first admission (default); ahead: admit the "
        "N first, then start the senders, clock from the first send (a backlog)",
    )
    parser.add_argument(
        "--key-retention",
        type=int,
        default=KEY_RETENTION,
        metavar="SECONDS",
        help="how long the provider keeps an idempotency key: the sandbox's "
        "idempotency_window_seconds and the services' RESETGATE_IDEMPOTENCY_WINDOW_SECONDS "
        f"(default {KEY_RETENTION}, the project's)",
    )
    parser.add_argument(
        "--search-delay",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="postmark: seconds before a send appears in the sandbox's outbound search "
        "(Postmark documents none; default 0). Mailgun's sandbox always ignores the "
        "undocumented user-variables filter",
    )
    parser.add_argument(
        "--timeline", action="store_true", help="print sends, 429s and the pacing rate a second"
    )
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        metavar="DIR",
        help="py-spy every sender from the storm's start to the drain's end (raw stacks in "
        "DIR) and print where their time went, idle included (benchmarks/storm_profile.py; "
        "pip install py-spy)",
    )
    parser.add_argument(
        "--outage",
        type=float,
        default=None,
        metavar="SECONDS",
        help="incident: how long every send is refused with no stated wait (default 90)",
    )
    parser.add_argument(
        "--traces",
        action="store_true",
        help="run each scenario twice, traces unset then exported at sampling 1.0 to an "
        "OTLP/HTTP receiver of the benchmark's, and print the senders' CPU per 1,000 emails "
        "of both",
    )
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS), default=[])
    parser.add_argument("--all", action="store_true", help="every scenario, in order")
    parser.add_argument(
        "--timeout",
        type=float,
        default=0.0,
        help="give up waiting for the drain (default 5 x ideal, at least 120 s)",
    )
    args = parser.parse_args()
    # Whether the services trace is --traces' to say: an OTEL_* setting of the shell's would
    # reach them (tests/support/processes.py passes the environment on) and skew the figures.
    for setting in [name for name in os.environ if name.startswith("OTEL_")]:
        del os.environ[setting]
    names = list(SCENARIOS) if args.all else args.scenario or ["ceiling-1.5"]
    runs = []
    for name in names:
        if args.traces:
            runs += traces_off_and_on(name, args)
            continue
        run = run_scenario(name, args)
        if run is not None:
            report(run)
            runs.append(run)
    summary(runs)


if __name__ == "__main__":
    main()

"""Benchmark: the public admission endpoint vs a bare aiohttp handler (the framework floor).

    .venv/bin/python benchmarks/admission.py [--duration 10] [--connections 50] [--rounds 3]

Starts a local redis-server, imports a few thousand accounts, runs ``python -m
services.admission`` (one process, uvloop) and a bare aiohttp app answering the same 202,
then loads each with wrk (a separate process; ``apt-get install wrk``) using a realistic mix:
known logins, unknown logins, and a hot set of accounts clicked again and again (resends,
cooldown repeats). Every request carries its own X-Forwarded-For behind one trusted proxy,
so the per-IP limit runs (its GCRA script included) without limiting the load generator.
A third server, for reference only, is the floor's app plus five sequential GETs over the
same Redis client admission uses: what five round trips cost before any admission logic.

With two or more CPUs each server under test is pinned to one CPU and wrk and redis-server to
the others, so every server gets the same CPU and the comparison is about what it does per
request, not about who wins the scheduler (--no-pin to turn that off). The targets are
measured in turn, round after round, and the summary takes each one's median, so a burst of
other work on the machine does not land on one target only. "server CPU" is the CPU time the
server process used per request: the cost that decides capacity even when the server idles.

``--variant NAME=VALUE`` measures two admission processes instead, alternating round by
round: one with the default settings and one with ``RESETGATE_NAME=VALUE`` only (an A/B of
one setting, e.g. ``--variant FAST_REDIS=false --rounds 4``).

Prints requests/s and p50/p99 side by side, then Redis round trips per admission by kind
(counted with MONITOR: commands from clients, not the ones scripts run inside Redis).
This is a benchmark, not a test: it prints figures and checks nothing.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import redis

from benchmarks import figures
from services.ctl.embedded import RedisServer, cleanup_directory, free_port
from shared import keys

ACCOUNTS = 5000
HOT = 50
BODY = b'{"status":"received"}'
TOKEN_KEYS = "k1:benchmark-secret-0123456789abcdef"

WRK_SCRIPT = """
math.randomseed(os.time() + math.floor(os.clock() * 1000000))
local accounts, hot = %(accounts)d, %(hot)d
local headers = {["Content-Type"] = "application/json"}
request = function()
  local r = math.random()
  local login
  if r < 0.60 then
    login = "player" .. math.random(1, accounts) .. "@example.com"    -- known, mostly new
  elseif r < 0.85 then
    login = "nobody" .. math.random(1, 1000000000) .. "@example.net"  -- unknown login
  else
    login = "player" .. math.random(1, hot) .. "@example.com"         -- resend / cooldown
  end
  headers["X-Forwarded-For"] = math.random(1, 223) .. "." .. math.random(0, 255) .. "." ..
    math.random(0, 255) .. "." .. math.random(1, 254)
  return wrk.format("POST", "/v1/password-resets", headers, '{"login":"' .. login .. '"}')
end
"""


def floor_server(port: int) -> None:
    """The framework floor: aiohttp on uvloop, reading the body and answering the same 202."""
    import uvloop
    from aiohttp import web

    async def handler(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=BODY, status=202, content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/password-resets", handler)
    uvloop.install()
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


def reference_server(port: int, redis_url: str) -> None:
    """The floor plus five sequential GETs over FastRedis (what admission's handlers use)."""
    import uvloop
    from aiohttp import web
    from redis.asyncio import Redis

    from shared.fastredis import FastRedis
    from shared.redis import create_client
    from shared.settings import CommonSettings

    async def make_app() -> web.Application:
        inner = create_client(CommonSettings(redis_url=redis_url))
        assert isinstance(inner, Redis)
        client = FastRedis(inner)

        async def handler(request: web.Request) -> web.Response:
            await request.read()
            for _ in range(5):
                await client.get(f"{keys.PREFIX}:benchmark:reference")
            return web.Response(body=BODY, status=202, content_type="application/json")

        async def close(_: web.Application) -> None:
            await client.aclose()
            await inner.aclose()

        app = web.Application()
        app.router.add_post("/v1/password-resets", handler)
        app.on_cleanup.append(close)
        return app

    uvloop.install()
    web.run_app(make_app(), host="127.0.0.1", port=port, access_log=None, print=None)


def wait_healthy(url: str, process: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"server exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=0.5):
                return
        except OSError as error:
            if getattr(error, "code", None):  # an HTTP error answer: it is up
                return
            time.sleep(0.05)
    raise SystemExit(f"{url} did not come up")


def start_admission(
    redis_url: str, port: int, ops_port: int, **overrides: str
) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESETGATE_")}
    env.update(
        RESETGATE_REDIS_URL=redis_url,
        RESETGATE_TOKEN_KEYS=TOKEN_KEYS,
        RESETGATE_INTERNAL_API_TOKEN="benchmark-internal-token",
        RESETGATE_HTTP_HOST="127.0.0.1",
        RESETGATE_HTTP_PORT=str(port),
        RESETGATE_METRICS_PORT=str(ops_port),
        RESETGATE_TRUSTED_PROXY_HOPS="1",
        RESETGATE_LOG_LEVEL="WARNING",
        # The response floor (timing: security.md) holds answers without using CPU; with it,
        # closed-loop wrk would measure 50 connections / 25 ms, not what a process can do.
        RESETGATE_PUBLIC_RESPONSE_FLOOR_MS="0",
    )
    env.update({f"RESETGATE_{name}": value for name, value in overrides.items()})
    process = subprocess.Popen([sys.executable, "-m", "services.admission"], cwd=ROOT, env=env)
    wait_healthy(f"http://127.0.0.1:{ops_port}/readyz", process)
    return process


def start_floor(port: int, *reference: str) -> subprocess.Popen[bytes]:
    mode = ["--reference", str(port), *reference] if reference else ["--floor", str(port)]
    process = subprocess.Popen([sys.executable, __file__, *mode], cwd=ROOT)
    wait_healthy(f"http://127.0.0.1:{port}/v1/password-resets", process)
    return process


def import_accounts(client: redis.Redis) -> None:
    pipe = client.pipeline(transaction=False)
    for i in range(1, ACCOUNTS + 1):
        account = f"acct-{i}"
        pipe.set(keys.directory_login(f"player{i}@example.com"), account)
        pipe.hset(keys.directory_account(account), mapping={"email": f"p{i}@example.com"})
    pipe.execute()


def reset_store(client: redis.Redis) -> None:
    """Forget every operation, account record and limiter bucket; keep the directory."""
    batch: list[str] = []
    for key in client.scan_iter(f"{keys.PREFIX}:*", count=1000):
        batch.append(key)
        if len(batch) == 1000:
            client.unlink(*batch)
            batch.clear()
    if batch:
        client.unlink(*batch)


def pin(pid: int, cpus: set[int] | None) -> None:
    if cpus:
        os.sched_setaffinity(pid, cpus)


def wrk(
    url: str, script: Path, seconds: int, connections: int, cpus: set[int] | None
) -> dict[str, float]:
    taskset = ["taskset", "-c", ",".join(map(str, sorted(cpus)))] if cpus else []
    out = subprocess.run(
        [
            *taskset,
            "wrk",
            "-t2",
            f"-c{connections}",
            f"-d{seconds}s",
            "--latency",
            "-s",
            str(script),
            url,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),  # type: ignore[union-attr]
        "p50": latency(out, "50%"),
        "p99": latency(out, "99%"),
        "requests": float(re.search(r"(\d+) requests in", out).group(1)),  # type: ignore[union-attr]
        "non2xx": float(m.group(1))
        if (m := re.search(r"Non-2xx or 3xx responses: (\d+)", out))
        else 0.0,
    }


def latency(out: str, percentile: str) -> float:
    match = re.search(rf"^\s+{re.escape(percentile)}\s+([\d.]+)(us|ms|s)\s*$", out, re.MULTILINE)
    assert match, out
    value, unit = float(match.group(1)), match.group(2)
    return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value


class Monitor:
    """Counts commands clients send (MONITOR marks script-internal ones as ``lua``)."""

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url)
        self.count = 0
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        time.sleep(0.2)

    def _run(self) -> None:
        try:
            with self.client.monitor() as monitor:
                for command in monitor.listen():
                    if command.get("client_type") != "lua":
                        with self.lock:
                            self.count += 1
        except redis.exceptions.ConnectionError:
            return  # redis-server stopped at the end of the run

    def snapshot(self) -> int:
        time.sleep(0.3)  # let MONITOR catch up
        with self.lock:
            return self.count


def post(base: str, login: str, ip: str) -> None:
    request = urllib.request.Request(
        f"{base}/v1/password-resets",
        data=f'{{"login":"{login}"}}'.encode(),
        method="POST",
        headers={"Content-Type": "application/json", "X-Forwarded-For": ip},
    )
    with urllib.request.urlopen(request) as response:
        assert response.status == 202


def round_trips(base: str, redis_url: str) -> dict[str, float]:
    """Client commands per request for each kind of public admission (100 requests each)."""
    monitor = Monitor(redis_url)
    kinds = {
        "new (known login, created)": lambda i: f"player{ACCOUNTS - i}@example.com",
        "repeat (converged)": lambda i: f"player{ACCOUNTS - i}@example.com",
        "unknown login": lambda i: f"ghost{i}@example.net",
    }
    figures = {}
    for name, login in kinds.items():
        before = monitor.snapshot()
        for i in range(100):
            post(base, login(i), f"10.9.{i // 250}.{i % 250 + 1}")
        figures[name] = (monitor.snapshot() - before) / 100
    return figures


def print_mix(port: int) -> None:
    """What the load amounted to: admissions by result, from the service's own /metrics
    (``port``: its operational listener)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as response:
        text = response.read().decode()
    pattern = r'resetgate_admissions_total\{entry_point="public",result="(\w+)"\} ([\d.e+]+)'
    found = re.findall(pattern, text)
    total = sum(float(n) for _, n in found) or 1.0
    mix = ", ".join(f"{result} {float(n) / total:.0%}" for result, n in found)
    print(f"\nadmission results over the whole run: {mix}")


def commands_processed(client: redis.Redis) -> int:
    return int(client.info("stats")["total_commands_processed"])


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (from /proc)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


FLOOR = "floor (bare aiohttp 202)"
ADMISSION = "admission POST /v1/password-resets"
REFERENCE = "reference: floor + 5 GETs"


def measure(
    url: str,
    pid: int,
    script: Path,
    args: argparse.Namespace,
    client: redis.Redis,
    load_cpus: set[int] | None,
) -> dict[str, float]:
    commands, cpu = commands_processed(client), cpu_seconds(pid)
    result = wrk(url, script, args.duration, args.connections, load_cpus)
    result["redis_cmds"] = (commands_processed(client) - commands) / result["requests"]
    result["cpu_us"] = (cpu_seconds(pid) - cpu) * 1e6 / result["requests"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3, help="floor, admission, reference each")
    parser.add_argument("--no-pin", action="store_true", help="do not pin processes to CPUs")
    parser.add_argument(
        "--variant", metavar="NAME=VALUE", help="A/B: admission as is vs with RESETGATE_NAME=VALUE"
    )
    parser.add_argument("--floor", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--reference", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.floor:
        floor_server(args.floor)
        return
    if args.reference:
        reference_server(int(args.reference[0]), args.reference[1])
        return
    if shutil.which("wrk") is None:
        raise SystemExit("wrk not found: apt-get install -y wrk")
    cpus = sorted(os.sched_getaffinity(0))
    pinned = len(cpus) >= 2 and not args.no_pin
    server_cpus = {cpus[0]} if pinned else None  # the server under test, alone
    load_cpus = set(cpus[1:]) if pinned else None  # wrk and redis-server
    server = RedisServer(appendonly=True, appendfsync="everysec").start()
    assert server.process is not None
    pin(server.process.pid, load_cpus)
    work = Path(tempfile.mkdtemp(prefix="rg-bench-"))
    processes: dict[str, tuple[subprocess.Popen[bytes], int]] = {}
    try:
        client = redis.Redis.from_url(server.url, decode_responses=True)
        import_accounts(client)
        script = work / "mix.lua"
        script.write_text(WRK_SCRIPT % {"accounts": ACCOUNTS, "hot": HOT})
        ports = {FLOOR: free_port(), ADMISSION: free_port(), REFERENCE: free_port()}
        ops_port = free_port()
        if args.variant:
            processes = start_variants(server.url, args.variant, ports[ADMISSION], ops_port)
        else:
            processes = {
                FLOOR: (start_floor(ports[FLOOR]), ports[FLOOR]),
                ADMISSION: (
                    start_admission(server.url, ports[ADMISSION], ops_port),
                    ports[ADMISSION],
                ),
                REFERENCE: (start_floor(ports[REFERENCE], server.url), ports[REFERENCE]),
            }
        for process, _ in processes.values():
            pin(process.pid, server_cpus)
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in processes}
        for round_ in range(args.rounds):
            for name, (process, port) in processes.items():
                reset_store(client)  # every round starts from the same state: the same mix
                url = f"http://127.0.0.1:{port}/v1/password-resets"
                wrk(url, script, 3 if round_ == 0 else 1, args.connections, load_cpus)  # warm-up
                runs[name].append(measure(url, process.pid, script, args, client, load_cpus))
        report(runs, args, server_cpus, load_cpus)
        print_mix(ops_port)
        reset_store(client)  # so "new" logins are new
        trips = round_trips(f"http://127.0.0.1:{ports[ADMISSION]}", server.url)
        print("\nRedis round trips per public admission (client commands, MONITOR):")
        for kind, value in trips.items():
            print(f"  {kind:<32} {value:.2f}")
        print("  (each: GCRA script, directory GET + HGETALL, account HMGET, admit script)")
    finally:
        for process, _ in processes.values():
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=15)
        server.stop()
        cleanup_directory(server.directory)
        shutil.rmtree(work, ignore_errors=True)


def start_variants(
    redis_url: str, variant: str, port: int, ops_port: int
) -> dict[str, tuple[subprocess.Popen[bytes], int]]:
    """Admission with default settings (``port``, ``ops_port``: the one the round trips and
    the mix are read from) and admission with ``RESETGATE_NAME=VALUE``."""
    name, _, value = variant.partition("=")
    other, other_ops = free_port(), free_port()
    return {
        ADMISSION: (start_admission(redis_url, port, ops_port), port),
        f"{ADMISSION} {name}={value}": (
            start_admission(redis_url, other, other_ops, **{name: value}),
            other,
        ),
    }


def label(target: str) -> str:
    """A target's short name: its first word, or its variant (NAME=VALUE)."""
    words = target.split()
    return words[-1] if "=" in words[-1] else words[0]


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def report(
    runs: dict[str, list[dict[str, float]]],
    args: argparse.Namespace,
    server_cpus: set[int] | None,
    load_cpus: set[int] | None,
) -> None:
    layout = (
        f"server on CPU {sorted(server_cpus)}, wrk + redis-server on CPU {sorted(load_cpus)}"
        if server_cpus and load_cpus
        else f"unpinned on {os.cpu_count()} CPUs"
    )
    print(
        f"\n{args.connections} connections, {args.duration}s per run, {args.rounds} rounds, "
        f"wrk -t2, one server process each (uvloop); Redis AOF everysec; {layout}; "
        "admission's response floor off (RESETGATE_PUBLIC_RESPONSE_FLOOR_MS=0)"
    )
    print(
        "\neach round (busy: the server's CPU time / wall time; a CPU-bound floor well under "
        "~95% means other work took its CPU):"
    )
    for index in range(args.rounds):
        line = "  ".join(
            f"{label(name)} {(r := runs[name][index])['rps']:>6.0f} req/s "
            f"p99 {r['p99']:>5.1f} busy {r['cpu_us'] * r['rps'] / 1e4:>3.0f}%"
            for name in runs
        )
        print(f"  {index + 1}: {line}")
    # Other work on the machine only ever slows a run down: each target's best round is the
    # closest to what it can do; CPU per request hardly depends on it (median).
    best = {name: max(rs, key=lambda r: r["rps"]) for name, rs in runs.items()}
    cpu = {name: median([r["cpu_us"] for r in rs]) for name, rs in runs.items()}
    print(
        f"\nbest round of each:\n{'target':<38}{'req/s':>9}{'p50 ms':>8}{'p99 ms':>8}"
        f"{'non-2xx':>8}{'CPU µs/req (median)':>21}{'redis cmds/req*':>16}"
    )
    for name, r in best.items():
        print(
            f"{name:<38}{r['rps']:>9.0f}{r['p50']:>8.2f}{r['p99']:>8.2f}{r['non2xx']:>8.0f}"
            f"{cpu[name]:>21.1f}{r['redis_cmds']:>16.2f}"
        )
    print("* every command Redis ran, including those inside the Lua scripts")
    if FLOOR not in best:  # --variant: the two admissions, side by side
        (a, ra), (b, rb) = best.items()
        print(
            f"\n{b.split()[-1]} / default: throughput {rb['rps'] / ra['rps']:.0%} "
            f"(best rounds), CPU per request {cpu[b] / cpu[a]:.0%} (medians), "
            f"p99 {rb['p99']:.2f} vs {ra['p99']:.2f} ms"
        )
        return
    floor, admission = best[FLOOR], best[ADMISSION]
    figures.emit(
        {
            "admission req/s (best round)": f"{admission['rps']:,.0f}",
            "p50 / p99": f"{admission['p50']:.1f} ms / {admission['p99']:.1f} ms",
            "share of bare aiohttp": f"{admission['rps'] / floor['rps']:.0%}",
            "CPU per request": f"{cpu[ADMISSION]:.0f} µs",
        }
    )
    print(
        f"\nadmission / floor throughput: {admission['rps'] / floor['rps']:.0%} "
        f"(by server CPU per request: {cpu[FLOOR] / cpu[ADMISSION]:.0%}; target >= 70%); "
        f"admission p99 {admission['p99']:.2f} ms (target <= 15 ms)"
    )


if __name__ == "__main__":
    main()

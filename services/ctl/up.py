"""``resetgate up``: the whole stack on this machine, with no credentials to find.

Uses ``RESETGATE_REDIS_URL`` when set, else starts an embedded redis-server (data kept in
``<dir>/redis`` across runs); starts the sandbox provider (one per name with ``--providers``)
and every service as child processes, the support console on its own port and the sandbox's
pushed events wired to the poller; seeds the demo accounts, writes ``<dir>/env`` for the
``resetgate`` command and a second shell, prints where everything listens, and watches every
child, Redis included. Ctrl-C (or any child dying) stops the services first, then the
sandbox, then Redis.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

from services.ctl import banner, demo, localpg, localstack, prometheus, stack
from services.ctl.embedded import RedisServer
from services.ctl.ports import (
    MAX_PROVIDERS,
    OPS,
    check_ports,
    plan_ports,
    port_layout,
    requested_port,
)
from shared.providers.registry import SANDBOX_MODES, keyless

SERVICES = ("admission", "sender", "poller", "router")
# Provider kinds the local sandbox can stand in for (SES has moto; see docs/providers.md).
SANDBOX_KINDS = SANDBOX_MODES
SECRETS_FILE = "secrets.env"


@dataclass
class Child:
    name: str
    port: int  # where it is probed: the operational listener (the sandbox: its only port)
    process: subprocess.Popen[bytes]
    log: Path

    def exit_line(self) -> str:
        """Why it stopped, in one line: the exit status, the cause from its log, the log."""
        return (
            f"{self.name} exited with {self.process.returncode}: {last_words(self.log)}; "
            f"log: {self.log}"
        )


def last_words(log: Path) -> str:
    """The last line of a log that says something (a traceback's last line is its cause)."""
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines()]
    except OSError:
        return "no log"
    said = [line for line in lines if line]
    return said[-1][:300] if said else "nothing logged"


def requested_names(args: argparse.Namespace) -> list[str]:
    """``--providers a,b``: the names, each served by a sandbox of its own ([] without it)."""
    if not args.providers:
        return []
    names = [name.strip() for name in args.providers.split(",")]
    if not all(name.isalnum() and name.islower() for name in names) or len(set(names)) != len(
        names
    ):
        raise SystemExit(
            f"--providers: {args.providers!r}: distinct names of a-z and 0-9, "
            "comma-separated (primary,standby)"
        )
    if len(names) > MAX_PROVIDERS:
        raise SystemExit(f"--providers: at most {MAX_PROVIDERS} names")
    return names


def check_provider_kind(args: argparse.Namespace) -> None:
    """The sandbox speaks RESETGATE_PROVIDER_KIND's API: a kind it cannot speak is one line
    naming the variable, before anything starts (else the sandbox dies on it first)."""
    kind = os.environ.get("RESETGATE_PROVIDER_KIND", args.provider)
    if kind not in SANDBOX_KINDS:
        raise SystemExit(
            f"invalid configuration: RESETGATE_PROVIDER_KIND: {kind!r} is not a provider the "
            f"local sandbox speaks ({', '.join(SANDBOX_KINDS)}); unset it and choose one with "
            "`resetgate up --provider KIND`"
        )


def local_secrets(directory: Path) -> dict[str, str]:
    """The token keys and the internal API token, made once and kept in ``<dir>/secrets.env``:
    a restart keeps every reset link (and the bearer in your shell) valid."""
    path = directory / SECRETS_FILE
    kept = stack.read_env(path) if path.is_file() else {}
    made = {
        "RESETGATE_TOKEN_KEYS": f"local:{secrets.token_urlsafe(32)}",
        "RESETGATE_INTERNAL_API_TOKEN": secrets.token_urlsafe(24),
        **localstack.new_hook_secrets(),
    }
    values = {**made, **kept}
    if values != kept:  # a .run/ of an older version gets what it lacks, nothing changes
        stack.write_env(path, values)
    return values


MAIN_SECRETS = ("RESETGATE_TOKEN_KEYS", "RESETGATE_INTERNAL_API_TOKEN")


def base_env(
    redis_url: str,
    ports: dict[str, int],
    directory: Path,
    provider: str = "http",
    names: list[str] | None = None,
) -> dict[str, str]:
    admission = f"http://127.0.0.1:{ports['admission']}"
    sandbox = ports.get("sandbox") or ports[f"sandbox {names[0]}" if names else "sandbox"]
    env = dict(os.environ)
    env.setdefault("RESETGATE_PROVIDER_KIND", provider)
    env.setdefault("RESETGATE_PROVIDER_NAME", provider)
    env.setdefault("RESETGATE_MAILGUN_DOMAIN", "sandbox.mailgun.test")
    env["RESETGATE_SANDBOX_MODE"] = env["RESETGATE_PROVIDER_KIND"]
    env["RESETGATE_HTTP_PORT"] = str(ports["admission"])  # admission's API
    env.setdefault("RESETGATE_REDIS_URL", redis_url)
    kept = local_secrets(directory)
    for name in MAIN_SECRETS:
        env.setdefault(name, kept[name])
    env.setdefault("RESETGATE_PROVIDER_URL", f"http://127.0.0.1:{sandbox}")
    env.setdefault("RESETGATE_PROVIDER_API_KEY", "sandbox-key")
    if names:
        sandboxes = [ports[f"sandbox {name}"] for name in names]
        env.update(
            localstack.named_providers(
                names, env["RESETGATE_PROVIDER_KIND"], sandboxes, env["RESETGATE_PROVIDER_API_KEY"]
            )
        )
    env.update(
        localstack.webhook_env(kept, env["RESETGATE_PROVIDER_KIND"], ports.get("webhooks", 0))
    )
    # The console on its own loopback port, its cookie over plain HTTP (loopback only).
    env.setdefault("RESETGATE_CONSOLE_PORT", str(ports["console"]))
    env.setdefault("RESETGATE_CONSOLE_COOKIE_SECURE", "false")
    # The minimal reset page admission serves in local runs only (docs/api.md).
    env.setdefault("RESETGATE_RESET_URL_BASE", f"{admission}/reset-password")
    env.setdefault("RESETGATE_LOCAL_RESET_PAGE", "true")
    env.setdefault("RESETGATE_HTTP_HOST", "127.0.0.1")
    env["RESETGATE_SANDBOX_PORT"] = str(sandbox)
    # The emails the sandbox received survive a restart of the stack (one file per sandbox).
    env["RESETGATE_SANDBOX_MESSAGES_FILE"] = str(directory / "sandbox-messages.json")
    env["RESETGATE_SANDBOX_API_KEY"] = env["RESETGATE_PROVIDER_API_KEY"]
    env.setdefault("RESETGATE_SANDBOX_BOUNCE_DOMAIN", "bounce.example")
    # The inbox page shows what resetgate says of each email's operation beside the sandbox's.
    env["RESETGATE_SANDBOX_INBOX_RESETGATE_URL"] = admission
    env["RESETGATE_SANDBOX_INBOX_RESETGATE_TOKEN"] = env["RESETGATE_INTERNAL_API_TOKEN"]
    env["RESETGATE_UP_DIR"] = str(directory)
    return env


def start(name: str, port: int, env: dict[str, str], logs: Path) -> Child:
    """``port``: the operational listener (RESETGATE_METRICS_PORT); the sandbox's only one
    (``sandbox NAME``: one of several, logging to sandbox-NAME.log)."""
    module, _, suffix = name.partition(" ")
    path = logs / f"{module}{'-' + suffix if suffix else ''}.log"
    extra = {"RESETGATE_METRICS_PORT": str(port)}
    if module == "sandbox":
        extra["RESETGATE_SANDBOX_PORT"] = str(port)
        if suffix:  # one of several: a file of its own
            extra["RESETGATE_SANDBOX_MESSAGES_FILE"] = str(logs / f"sandbox-{suffix}-messages.json")
    with path.open("ab") as log:
        # A session of its own: Ctrl-C reaches `resetgate up`, which stops children in order.
        process = subprocess.Popen(
            [sys.executable, "-m", f"services.{module}"],
            env=dict(env, **extra),
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    return Child(name, port, process, path)


def wait_ready(child: Child, path: str, timeout: float = 120.0) -> None:
    """Until ``child`` answers 200 on ``path``; a child that exits stops the wait at once, so
    the bound only meets a live child that is slow: a loaded machine took over 30 s."""
    deadline = time.monotonic() + timeout
    url = f"http://127.0.0.1:{child.port}{path}"
    while time.monotonic() < deadline:
        if child.process.poll() is not None:
            raise SystemExit(child.exit_line())
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"{child.name} not ready on {url} after {timeout:g}s; log: {child.log}")


def seed_accounts(env: dict[str, str], directory: Path) -> None:
    path = directory / "demo-accounts.csv"
    path.write_text(demo.accounts_csv(env))
    done = subprocess.run(
        [sys.executable, "-m", "services.ctl.main", "accounts", "import", str(path)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"seeding the demo accounts failed: {done.stderr.strip()}")


def stop(children: list[Child], timeout: float = 25.0) -> None:
    """SIGTERM to every child at once (they finish in-flight work), SIGKILL past the grace."""
    for child in reversed(children):
        if child.process.poll() is None:
            child.process.send_signal(signal.SIGTERM)
    for child in reversed(children):
        try:
            child.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            child.process.kill()
            child.process.wait()


def watch(children: list[Child]) -> Child:
    """Block until a child (Redis included) exits; return it."""
    while True:
        for child in children:
            if child.process.poll() is not None:
                return child
        time.sleep(0.3)


def embedded_redis(directory: Path, provider: str, port: int) -> tuple[RedisServer, Child]:
    data = directory / "redis"
    data.mkdir(exist_ok=True)
    # A provider without an idempotency key needs every acknowledged write on disk (the
    # sender refuses to start otherwise; docs/providers.md).
    fsync = "always" if keyless(provider) else "everysec"
    server = RedisServer(port, directory=str(data), appendonly=True, appendfsync=fsync).start()
    assert server.process is not None
    return server, Child("redis", server.port, server.process, data / "redis.log")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "up",
        help="run the whole stack locally (embedded Redis, sandbox provider)",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    parser.add_argument(
        "--port",
        type=int,
        default=None,
        help="admission's API port (default: $RESETGATE_HTTP_PORT, else 8080); every other "
        f"port at a fixed offset from it: {port_layout()}",
    )
    parser.add_argument(
        "--dir",
        default=stack.RUN_DIR,
        help="logs, secrets, the env file and the embedded Redis' data (default: .run)",
    )
    parser.add_argument(
        "--provider",
        choices=SANDBOX_KINDS,
        default="http",
        help="which provider API the services speak; the sandbox answers as it documents",
    )
    parser.add_argument(
        "--providers",
        default="",
        metavar="A,B",
        help="several named providers (RESETGATE_PROVIDERS), each with a sandbox of its own "
        "from port + 10; the first serves every partition until `resetgate ops provider "
        "switch` moves some",
    )
    parser.add_argument(
        "--prometheus",
        action="store_true",
        help="also run Prometheus scraping every service, the chart's alert rules loaded",
    )
    parser.add_argument(
        "--no-archive",
        dest="archive",
        action="store_false",
        help="start no local PostgreSQL (a quicker start): the archive is then only the one "
        "RESETGATE_ARCHIVE_DSN names, else retention is Redis-only",
    )
    parser.set_defaults(handler=up)


def up(args: argparse.Namespace) -> int:
    # Ctrl-C and SIGTERM stop the stack in order, even when this process inherited SIGINT
    # ignored (a background job of a non-interactive shell, a test runner's worker).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    directory = Path(args.dir).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    given = stack.given_settings()
    check_provider_kind(args)
    names = requested_names(args)
    kind = os.environ.get("RESETGATE_PROVIDER_KIND", args.provider)
    redis_url = os.environ.get("RESETGATE_REDIS_URL", "")
    ports = plan_ports(requested_port(args), kind, names, not redis_url, args.prometheus)
    check_ports(ports)
    services: list[Child] = []
    redis_child: list[Child] = []
    archive: localpg.LocalPostgres | None = None
    try:
        if not redis_url:
            server, child = embedded_redis(directory, args.provider, ports["redis"])
            redis_url, redis_child = server.url, [child]
        env = base_env(redis_url, ports, directory, args.provider, names)
        first = requested_port(args)
        archive, archive_line = (
            localpg.local_archive(env, directory, first + localpg.POSTGRES_OFFSET)
            if args.archive or env.get("RESETGATE_ARCHIVE_DSN")
            else (None, "archive: none (--no-archive), retention is Redis-only")
        )
        if env.get("RESETGATE_ARCHIVE_DSN"):
            ports[localpg.ARCHIVER_OPS] = first + localpg.ARCHIVER_OFFSET
        seed_accounts(env, directory)
        note = "; ".join(n for n in (forget_stale(env), archive_line) if n)
        return run(env, ports, directory, services, redis_child, note, given)
    except KeyboardInterrupt:
        print("\nstopping: services first, then the sandbox, then Redis ...", file=sys.stderr)
        return 0
    finally:
        (directory / stack.ENV_FILE).unlink(missing_ok=True)
        stop(services)  # services before Redis: no ConnectionError storm while they stop
        stop(redis_child, timeout=10)
        if archive is not None:
            archive.stop()


def run(
    env: dict[str, str],
    ports: dict[str, int],
    directory: Path,
    services: list[Child],
    redis_child: list[Child],
    note: str = "",
    given: dict[str, str] | None = None,
) -> int:
    for name in (n for n in ports if n.startswith("sandbox")):
        services.append(start(name, ports[name], env, directory))
        wait_ready(services[-1], "/healthz")
    if env.get("RESETGATE_SANDBOX_WEBHOOK_URL") and env["RESETGATE_PROVIDER_KIND"] == "sendgrid":
        env.update(
            localstack.sendgrid_key(
                env["RESETGATE_PROVIDER_URL"], env["RESETGATE_PROVIDER_API_KEY"]
            )
        )
    sandboxes = len(services)
    for name in (n for n in SERVICES if find_spec(f"services.{n}")):
        services.append(start(name, ports[name + OPS], env, directory))
    if localpg.ARCHIVER_OPS in ports:
        services.append(start("archiver", ports[localpg.ARCHIVER_OPS], env, directory))
    for child in services[sandboxes:]:
        wait_ready(child, "/readyz")
    if "prometheus" in ports:
        log = directory / "prometheus.log"
        services.append(
            Child("prometheus", ports["prometheus"], prometheus.start(ports, directory), log)
        )
        wait_ready(services[-1], "/-/ready")
    stack.write_env(directory / stack.ENV_FILE, banner.env_file(env, ports, given))
    print(banner.text(env, ports, directory, redis_child != [], note), flush=True)
    dead = watch([*services, *redis_child])
    print(f"stopping everything: {dead.exit_line()}", file=sys.stderr)
    return 1


def forget_stale(env: dict[str, str]) -> str:
    """Partitions a previous run assigned to a provider not configured now go back to the
    default one (nothing would send them); what was done, for the banner ("" if nothing)."""
    names = localstack.configured_names(env)
    stale = localstack.forget_unconfigured(env["RESETGATE_REDIS_URL"], names)
    if not stale:
        return ""
    moved = ", ".join(f"{p} ({name})" for p, name in sorted(stale.items()))
    return f"partitions {moved} were assigned to a provider not configured now: back to {names[0]}"


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt

"""``resetgate up``: the whole stack on this machine, with no credentials to find.

Uses ``RESETGATE_REDIS_URL`` when set, else starts an embedded redis-server; starts the
sandbox provider and every service as child processes, seeds a few demo accounts, prints
where everything listens, and stops everything (SIGTERM, then SIGKILL) on Ctrl-C.
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

from services.ctl.embedded import RedisServer

SERVICES = ("admission", "sender", "poller", "router")
DEMO_ACCOUNTS = [
    ("player1", "acct-1001", "player1@example.com"),
    ("player2", "acct-1002", "player2@example.com"),
    ("bounce-me", "acct-1003", "someone@bounce.example"),
]


@dataclass
class Child:
    name: str
    port: int  # where it is probed: the operational listener (the sandbox: its only port)
    process: subprocess.Popen[bytes]


# Provider kinds the local sandbox can stand in for (SES has moto; see docs/providers.md).
SANDBOX_KINDS = ("http", "sendgrid", "postmark", "mailgun")


def _base_env(redis_url: str, sandbox_port: int, provider: str = "http") -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("RESETGATE_PROVIDER_KIND", provider)
    env.setdefault("RESETGATE_PROVIDER_NAME", provider)
    env.setdefault("RESETGATE_MAILGUN_DOMAIN", "sandbox.mailgun.test")
    env["RESETGATE_SANDBOX_MODE"] = env["RESETGATE_PROVIDER_KIND"]
    env.setdefault("RESETGATE_REDIS_URL", redis_url)
    env.setdefault("RESETGATE_TOKEN_KEYS", f"local:{secrets.token_urlsafe(32)}")
    env.setdefault("RESETGATE_INTERNAL_API_TOKEN", secrets.token_urlsafe(24))
    env.setdefault("RESETGATE_PROVIDER_URL", f"http://127.0.0.1:{sandbox_port}")
    env.setdefault("RESETGATE_PROVIDER_API_KEY", "sandbox-key")
    env.setdefault("RESETGATE_RESET_URL_BASE", "http://127.0.0.1:8080/reset-password")
    env.setdefault("RESETGATE_HTTP_HOST", "127.0.0.1")
    env["RESETGATE_SANDBOX_PORT"] = str(sandbox_port)
    env["RESETGATE_SANDBOX_API_KEY"] = env["RESETGATE_PROVIDER_API_KEY"]
    env.setdefault("RESETGATE_SANDBOX_BOUNCE_DOMAIN", "bounce.example")
    return env


def _start(name: str, port: int, env: dict[str, str], logs: Path, **extra: str) -> Child:
    """``port``: the operational listener (RESETGATE_METRICS_PORT); the sandbox's only one."""
    child_env = dict(env, RESETGATE_METRICS_PORT=str(port), **extra)
    log = (logs / f"{name}.log").open("ab")
    # A session of its own: Ctrl-C reaches `resetgate up`, which stops children in order.
    process = subprocess.Popen(
        [sys.executable, "-m", f"services.{name}"],
        env=child_env,
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    return Child(name, port, process)


def _wait_ready(child: Child, path: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    url = f"http://127.0.0.1:{child.port}{path}"
    while time.monotonic() < deadline:
        if child.process.poll() is not None:
            raise SystemExit(f"{child.name} exited with {child.process.returncode}; see its log")
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"{child.name} not ready on {url} after {timeout}s; see its log")


def _seed_accounts(env: dict[str, str]) -> None:
    rows = "\n".join(",".join(row) for row in DEMO_ACCOUNTS) + "\n"
    path = Path(env.get("RESETGATE_UP_DIR", ".run")) / "demo-accounts.csv"
    path.write_text("login,account_id,email\n" + rows)
    subprocess.run(
        [sys.executable, "-m", "services.ctl.main", "accounts", "import", str(path)],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )


def _stop(children: list[Child]) -> None:
    for child in reversed(children):
        if child.process.poll() is None:
            child.process.send_signal(signal.SIGTERM)
    for child in reversed(children):
        try:
            child.process.wait(timeout=25)
        except subprocess.TimeoutExpired:
            child.process.kill()


def _banner(env: dict[str, str], children: list[Child], logs: Path) -> str:
    base = f"http://127.0.0.1:{env['RESETGATE_HTTP_PORT']}"
    lines = ["resetgate is up:", f"  {'api':<10} {base}  (admission)"]
    lines += [f"  {c.name:<10} http://127.0.0.1:{c.port}"
              + ("" if c.name == "sandbox" else "  (/healthz /readyz /metrics)")
              for c in children]  # fmt: skip
    lines += [
        f"  redis      {env['RESETGATE_REDIS_URL']}",
        f"  logs       {logs}/",
        "",
        "try:",
        f"  curl -s -XPOST {base}/v1/password-resets -H 'Content-Type: application/json' "
        '-d \'{"login": "player1"}\'',
        f"  curl -s {base}/internal/v1/accounts/acct-1001/recovery-operation "
        f"-H 'Authorization: Bearer {env['RESETGATE_INTERNAL_API_TOKEN']}'",
        f"  RESETGATE_REDIS_URL={env['RESETGATE_REDIS_URL']} resetgate ops status",
        "Ctrl-C stops everything.",
    ]
    return "\n".join(lines)


def up(args: argparse.Namespace) -> int:
    logs = Path(args.dir).resolve()
    logs.mkdir(parents=True, exist_ok=True)
    redis_server = None
    redis_url = os.environ.get("RESETGATE_REDIS_URL", "")
    if not redis_url:
        redis_server = RedisServer(directory=str(logs / "redis"), appendonly=True)
        Path(redis_server.directory).mkdir(exist_ok=True)
        redis_url = redis_server.start().url
    env = _base_env(redis_url, args.port + 10, args.provider)
    env["RESETGATE_UP_DIR"] = str(logs)
    env["RESETGATE_HTTP_PORT"] = str(args.port)  # admission's API
    children: list[Child] = []
    try:
        _seed_accounts(env)
        sandbox = _start("sandbox", args.port + 10, env, logs)  # its port: SANDBOX_PORT
        children.append(sandbox)
        _wait_ready(sandbox, "/healthz")
        # Operational listeners on the next ports: 8081-8084, their own defaults, for 8080.
        for offset, name in enumerate(n for n in SERVICES if find_spec(f"services.{n}")):
            children.append(_start(name, args.port + 1 + offset, env, logs))
        for child in children[1:]:
            _wait_ready(child, "/readyz")
        print(_banner(env, children, logs), flush=True)
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
        while all(c.process.poll() is None for c in children):
            time.sleep(0.5)
        dead = [c.name for c in children if c.process.poll() is not None]
        print(f"stopping: {', '.join(dead)} exited; see {logs}/", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nstopping ...", file=sys.stderr)
        return 0
    finally:
        _stop(children)
        if redis_server:
            redis_server.stop()


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("up", help="run the whole stack locally (embedded Redis, sandbox)")
    parser.add_argument(
        "--port",
        type=int,
        default=8080,
        help="admission's API port; the services' /metrics, /readyz take the next four, "
        "the sandbox port + 10",
    )
    parser.add_argument("--dir", default=".run", help="logs and the embedded Redis' data")
    parser.add_argument(
        "--provider",
        choices=SANDBOX_KINDS,
        default="http",
        help="which provider API the services speak; the sandbox answers as it documents",
    )
    parser.set_defaults(handler=up)

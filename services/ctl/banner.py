"""What ``resetgate up`` tells a newcomer: where things listen, the token, the demo accounts,
commands that work as printed; and the ``env`` file the ``resetgate`` command reads."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from services.ctl import demo
from services.ctl.stack import DERIVED_VARIABLE, PID_VARIABLE
from shared.emails.files import DEFAULTS
from shared.redis import display_url

NAMED_PREFIX = "RESETGATE_PROVIDER_"  # RESETGATE_PROVIDER_<NAME>_KIND ... (with --providers)

DEMO_ACCOUNTS = demo.NAMED


PORT_NOTES = {
    "prometheus": "  (the chart's alert rules loaded: /alerts; every service scraped)",
    "ops": "  (/healthz /readyz /metrics)",
    "console": "  (the support console: sign in with the token below)",
    "webhooks": "  (the poller's webhook listener; the sandbox pushes its events here)",
}


def command_path() -> str:
    """How to call ``resetgate`` from here: ``.venv/bin/resetgate`` inside the checkout."""
    path = Path(sys.executable).parent / "resetgate"
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def env_file(
    env: dict[str, str], ports: dict[str, int], given: dict[str, str] | None = None
) -> dict[str, str]:
    """What ``.run/env`` holds: enough for the CLI to find this stack and for a shell
    (``. .run/env``) to call its API, and every RESETGATE_* setting ``up`` was ``given``
    (RESETGATE_TEMPLATES_DIR ...: a second shell's commands see what the services run with)."""
    given = given or {}
    names = (
        "RESETGATE_REDIS_URL",
        "RESETGATE_INTERNAL_API_TOKEN",
        "RESETGATE_PARTITIONS",
        "RESETGATE_PROVIDER_NAME",
        "RESETGATE_PROVIDER_KIND",
        "RESETGATE_PROVIDER_URL",
        "RESETGATE_PROVIDER_API_KEY",
        "RESETGATE_MAILGUN_DOMAIN",
        "RESETGATE_MAX_ATTEMPTS",
        "RESETGATE_PROVIDERS",
        "RESETGATE_RESET_URL_BASE",
    )
    values = {name: env[name] for name in names if name in env}
    # Every named provider's settings: a second shell's `ops provider show` and `switch`
    # must see the configuration the services run with.
    values.update({k: v for k, v in env.items() if k.startswith(NAMED_PREFIX)})
    values["RESETGATE_ADMISSION_URL"] = f"http://127.0.0.1:{ports['admission']}"
    values["RESETGATE_SANDBOX_URL"] = env["RESETGATE_PROVIDER_URL"]
    values["RESETGATE_CONSOLE_URL"] = f"http://127.0.0.1:{ports['console']}"
    values[DERIVED_VARIABLE] = " ".join(sorted(set(values) - set(given)))
    values.update(given)
    values[PID_VARIABLE] = str(os.getpid())
    return values


def provider_line(env: dict[str, str]) -> str:
    kind = env["RESETGATE_PROVIDER_KIND"]
    pushed = (
        "its signed webhooks wired to the poller"
        if env.get("RESETGATE_SANDBOX_WEBHOOK_URL")
        else "events from its feed"
    )
    listed = env.get("RESETGATE_PROVIDERS", "")
    if listed:
        return f"  provider   {listed} (RESETGATE_PROVIDERS; each a sandbox speaking {kind})"
    name = env["RESETGATE_PROVIDER_NAME"]
    return f"  provider   {name}: the sandbox speaking {kind}'s API, {pushed}"


def templates_line(env: dict[str, str]) -> str:
    folder = env.get("RESETGATE_TEMPLATES_DIR", "")
    if folder:
        return f"  templates  {Path(folder).resolve()} (RESETGATE_TEMPLATES_DIR)"
    return f"  templates  {DEFAULTS} (the shipped ones; RESETGATE_TEMPLATES_DIR for yours)"


def text(
    env: dict[str, str], ports: dict[str, int], directory: Path, embedded: bool, note: str = ""
) -> str:
    base = f"http://127.0.0.1:{ports['admission']}"
    token = env["RESETGATE_INTERNAL_API_TOKEN"]
    resetgate = command_path()
    bin_directory = Path(sys.executable).parent.absolute()
    where = f"embedded, data in {directory}/redis" if embedded else "from RESETGATE_REDIS_URL"
    lines = ["resetgate is up:"]
    lines += [
        f"  {name:<10} http://127.0.0.1:{port}{PORT_NOTES.get(name.split()[-1], '')}"
        for name, port in ports.items()
        if name != "redis"  # not HTTP: its own line below
    ]
    lines += [
        provider_line(env),
        f"  inbox      {env['RESETGATE_PROVIDER_URL']}/_sandbox/inbox (every email the "
        "sandbox received, rendered, with its link and its status)",
        f"  redis      {display_url(env['RESETGATE_REDIS_URL'])} ({where}; no password shown)",
        templates_line(env),
        f"  logs       {directory}/",
        f"  token      {token} (internal API bearer; kept in {directory}/secrets.env)",
        f"  env        {directory}/env (`. {directory}/env` exports the Redis URL, the token and"
        " RESETGATE_ADMISSION_URL; the resetgate command reads it by itself)",
        *([f"  note       {note}"] if note else []),
        "",
        "demo accounts (login, account):",
        *demo.banner_lines(env),
        "",
        "try:",
        f"  curl -s -XPOST {base}/v1/password-resets -H 'Content-Type: application/json' "
        '-d \'{"login": "player1"}\'',
        f"  curl -s {base}/internal/v1/accounts/acct-1001/recovery-operation "
        f"-H 'Authorization: Bearer {token}'",
        f"  {resetgate} ops status",
        f"  {resetgate} ops oldest",
        f'(to type plain `resetgate`: export PATH="{bin_directory}:$PATH")',
        "Ctrl-C stops everything.",
    ]
    return "\n".join(lines)

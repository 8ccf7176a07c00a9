"""A second shell that sourced `.run/env` keeps working across a restart of `resetgate up`:
every port, the embedded Redis' included, sits at a fixed offset from RESETGATE_HTTP_PORT; a
restart with other settings, or a stack that stopped, is named as such, never as Redis down.
A restart within a second of Ctrl-C comes up, the sandbox's emails kept."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest

from services.ctl import ports, stack
from shared.emails.files import DEFAULTS
from tests.ctl.test_up import (
    BANNER_S,
    child_env,
    ctrl_c,
    free_stack_port,
    listening,
    read_banner,
    reset_is_accepted,
    sandbox_messages,
    start_up,
)

TEMPLATES = str(DEFAULTS)  # a real templates folder, given to `up` as a studio would


def sourced(env_file: Path) -> dict[str, str]:
    """The environment of a shell after `. .run/env` (a real shell does the sourcing)."""
    done = subprocess.run(
        ["bash", "-c", f". {env_file} && env -0"],
        env=child_env(),
        capture_output=True,
        check=True,
        timeout=30,
    )
    pairs = (item.split(b"=", 1) for item in done.stdout.split(b"\0") if b"=" in item)
    return {name.decode(): value.decode() for name, value in pairs}


def ops_status(shell: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "services.ctl.main", "ops", "status"],
        env=shell,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def templates_command(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "services.ctl.main", "templates", *args],
        env=child_env(),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def up_from_env(run: Path, port: int, *args: str, **env: str) -> asyncio.subprocess.Process:
    process = await start_up(run, *args, RESETGATE_HTTP_PORT=str(port), **env)
    await asyncio.wait_for(read_banner(process), timeout=BANNER_S)
    return process


def test_every_port_sits_at_its_offset_from_the_http_port() -> None:
    """Redis included: a random Redis port made every restart strand a sourced .run/env."""
    for first in (8080, 18000):
        plan = ports.plan_ports(first, "postmark", ["a", "b"])
        assert plan["redis"] == first + ports.PORT_OFFSETS["redis"]
        assert {name: port - first for name, port in plan.items()} == {
            **{
                n: o
                for n, o in ports.PORT_OFFSETS.items()
                if n not in (*ports.ARCHIVE, "sandbox", "prometheus")
            },
            "sandbox a": ports.SANDBOX_OFFSET,
            "sandbox b": ports.SANDBOX_OFFSET + 1,
        }
    assert "redis" not in ports.plan_ports(8080, embedded=False), "RESETGATE_REDIS_URL: no Redis"
    assert ports.plan_ports(8080, prometheus=True)["prometheus"] == 8080 + 9
    offsets = list(ports.PORT_OFFSETS.values())
    assert len(set(offsets)) == len(offsets) and "postgres" in ports.PORT_OFFSETS


@pytest.mark.timeout(1200)
async def test_a_sourced_env_survives_a_restart_and_a_changed_one_is_named(
    tmp_path: Path,
) -> None:
    """Three stacks in one run folder: the first, given a templates folder; a restart within
    a second of Ctrl-C with the same settings; then one of another kind, started from a shell
    that sourced an old env file (each a stack fewer than a sequence of its own)."""
    port, run = free_stack_port(), tmp_path / ".run"
    first = await up_from_env(run, port, RESETGATE_TEMPLATES_DIR=TEMPLATES)
    try:
        for name, planned in ports.plan_ports(port).items():
            assert listening(planned), f"{name} is not on {planned}"
        shell = sourced(run / stack.ENV_FILE)
        assert shell["RESETGATE_REDIS_URL"] == f"redis://127.0.0.1:{port + ports.REDIS_OFFSET}/0"
        assert ops_status(shell, tmp_path).returncode == 0
        a_second_shell_that_sourced_nothing_sees_the_running_stack(tmp_path, shell, port)
        base, token = shell["RESETGATE_ADMISSION_URL"], shell["RESETGATE_INTERNAL_API_TOKEN"]
        view = await reset_is_accepted(base, token)
    finally:
        await ctrl_c(first)
    stopped = time.monotonic()
    again = await start_up(run, RESETGATE_HTTP_PORT=str(port), RESETGATE_TEMPLATES_DIR=TEMPLATES)
    try:
        assert time.monotonic() - stopped < 1
        await asyncio.wait_for(read_banner(again), timeout=BANNER_S)
        done = ops_status(shell, tmp_path)  # the same shell, not sourced again
        assert done.returncode == 0, done.stderr
        assert "cannot reach Redis" not in done.stderr
        # The sandbox still shows the email it received before the restart.
        sandbox = f"http://127.0.0.1:{port + ports.SANDBOX_OFFSET}"
        kept = await sandbox_messages(sandbox, view["operation_id"])
        assert len(kept) == 1 and "/reset-password?" in kept[0]["email"]["text"], kept
    finally:
        await ctrl_c(again)
    stopped = ops_status(shell, tmp_path)
    assert stopped.returncode == 1
    assert "has stopped: start the stack again" in stopped.stderr, stopped.stderr
    other = await up_from_a_shell_that_sourced_an_old_env_uses_its_own_settings(run, port, shell)
    try:
        changed = ops_status(shell, tmp_path)
        assert changed.returncode == 1
        assert "the stack restarted" in changed.stderr and "source" in changed.stderr
        assert "RESETGATE_PROVIDER_KIND" in changed.stderr
        assert "cannot reach Redis" not in changed.stderr, changed.stderr
        # And the stack of the other kind delivers: a reset through the sandbox speaking
        # mailgun's API (player1 is in its cooldown since the first stack: player2).
        sent = await reset_is_accepted(base, token, "player2", "acct-1002")
        assert sent["state"] == "accepted" and sent["provider"] == "mailgun", sent
    finally:
        await ctrl_c(other)


def a_second_shell_that_sourced_nothing_sees_the_running_stack(
    cwd: Path, shell: dict[str, str], port: int
) -> None:
    """What up was given (RESETGATE_TEMPLATES_DIR) is in the env file, and a shell that
    sourced nothing finds the running stack's folder and reset page."""
    assert shell["RESETGATE_TEMPLATES_DIR"] == TEMPLATES
    checked, preview = (templates_command(cwd, *a) for a in (["check"], ["preview"]))
    assert checked.stdout.startswith(f"templates ok: {TEMPLATES} "), checked.stderr
    assert f"http://127.0.0.1:{port}/reset-password?operation=" in preview.stdout


async def up_from_a_shell_that_sourced_an_old_env_uses_its_own_settings(
    run: Path, port: int, sourced_shell: dict[str, str]
) -> asyncio.subprocess.Process:
    """A second `make run` in the shell that sourced .run/env once failed seeding the demo
    accounts against the old Redis; what up was given (RESETGATE_TEMPLATES_DIR) still goes
    into the new env file, and a provider kind sourced from an old run is not taken for one
    given: the --provider asked for is the one run. The stack, running, for the caller."""
    shell = dict(sourced_shell)
    shell["RESETGATE_REDIS_URL"] = shell["RESETGATE_REDIS_URL"].replace(
        str(port + ports.REDIS_OFFSET), str(port + ports.PORT_OFFSETS["postgres"])
    )  # as a random port of an earlier version left it: nothing listens there
    shell["RESETGATE_PROVIDER_KIND"] = "postmark"  # sourced from a postmark run
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "services.ctl.main",
        "up",
        "--dir",
        str(run),
        "--provider",
        "mailgun",
        "--no-archive",  # as start_up does: this test does not look at the archive
        env=shell,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    try:
        banner = await asyncio.wait_for(read_banner(process), timeout=BANNER_S)
        assert f"redis://127.0.0.1:{port + ports.REDIS_OFFSET}/0 (embedded" in banner
        assert f"templates  {TEMPLATES} (RESETGATE_TEMPLATES_DIR)" in banner
        assert "speaking mailgun's API" in banner, "the sourced postmark is not a given kind"
        written = stack.read_env(run / stack.ENV_FILE)
        assert written["RESETGATE_TEMPLATES_DIR"] == TEMPLATES
    except BaseException:
        await ctrl_c(process)
        raise
    return process

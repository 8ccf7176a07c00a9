"""Issue 15 items 2, 6 and 9 as a newcomer meets them: which Redis the `resetgate` command
talks to (and saying so), an unreachable Redis in one line, --help, `ops show`, `| head`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from redis.asyncio import Redis

from services.ctl import stack
from services.ctl.embedded import RedisServer, free_port
from shared.admit import Admitter
from shared.ids import operation_id
from shared.settings import PolicySettings
from shared.tokens import TokenKeys
from tests.support.processes import START_TIMEOUT

# A well-formed id: an ill-formed one is refused before Redis is asked.
VALID_ID = operation_id(1, 0)


def resetgate(
    *args: str, cwd: Path, env: dict[str, str] | None = None, stdout: int | None = None
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("RESETGATE_")}
    return subprocess.run(
        [sys.executable, "-m", "services.ctl.main", *args],
        cwd=cwd,
        env={**base, **(env or {})},
        capture_output=stdout is None,
        stdout=stdout,
        stderr=subprocess.PIPE if stdout is not None else None,
        text=True,
        timeout=START_TIMEOUT,  # a Python start-up on a loaded machine: only a hang waits it
        check=False,
    )


def local_stack(directory: Path, redis_url: str, pid: int) -> Path:
    """What `resetgate up` leaves in .run/: an env file naming its Redis and itself."""
    run = directory / ".run"
    run.mkdir(parents=True)
    return stack.write_env(
        run / "env",
        {
            "RESETGATE_REDIS_URL": redis_url,
            "RESETGATE_PARTITIONS": "4",
            stack.PID_VARIABLE: str(pid),
        },
    )


def test_the_cli_finds_the_stack_make_run_started_and_says_which_redis(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    path = local_stack(tmp_path, redis_server.url, os.getpid())
    assert path.stat().st_mode & 0o077 == 0, "the env file holds a bearer token: owner only"
    inside = tmp_path / "some" / "subdirectory"
    inside.mkdir(parents=True)
    done = resetgate("ops", "status", cwd=inside)
    assert done.returncode == 0, done.stderr
    first = done.stderr.splitlines()[0]
    assert (
        first == f"redis: {redis_server.url}, from {path}, written by `resetgate up` "
        f"(pid {os.getpid()})"
    )
    # provider line, pacing line, the failed and bounced counts, header, 4 partitions
    assert len(done.stdout.splitlines()) == 2 + 2 + 1 + 4


def test_redis_url_wins_and_a_dead_stacks_env_file_is_an_error_not_a_guess(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    gone = subprocess.Popen(["true"])  # a `resetgate up` killed with SIGKILL left its file
    gone.wait()
    local_stack(tmp_path, redis_server.url, gone.pid)
    stale = resetgate("ops", "status", cwd=tmp_path)
    assert stale.returncode == 1
    assert "no longer running" in stale.stderr and "make run" in stale.stderr
    assert "Traceback" not in stale.stderr
    chosen = resetgate(
        "ops",
        "status",
        cwd=tmp_path,
        env={"RESETGATE_REDIS_URL": redis_server.url, "RESETGATE_PARTITIONS": "4"},
    )
    assert chosen.returncode == 0, chosen.stderr
    assert chosen.stderr.splitlines()[0] == f"redis: {redis_server.url}, from RESETGATE_REDIS_URL"


def test_an_unreachable_redis_is_one_line_naming_it_for_every_state_command(
    tmp_path: Path,
) -> None:
    nowhere = f"redis://:secret-password@127.0.0.1:{free_port()}/0"
    env = {"RESETGATE_REDIS_URL": nowhere, "RESETGATE_REDIS_TIMEOUT_SECONDS": "1"}
    shown = nowhere.replace(":secret-password@", "")
    for args in (
        ("ops", "status"),
        ("ops", "show", VALID_ID),
        ("accounts", "add", "p", "a-1", "p@example.com"),
    ):
        done = resetgate(*args, cwd=tmp_path, env=env)
        lines = done.stderr.splitlines()
        assert done.returncode == 1, args
        assert shown in lines[0], (args, lines)
        assert lines[-1].startswith(f"error: cannot reach Redis at {shown}"), (args, lines)
        assert len(lines) == 2 and "Traceback" not in done.stderr, (args, done.stderr)
        assert "secret-password" not in done.stderr


def test_help_speaks_to_users() -> None:
    done = resetgate("--help", cwd=Path.cwd())
    assert done.returncode == 0
    for command in ("resetgate up", "resetgate accounts", "resetgate ops", ".run/env"):
        assert command in done.stdout
    assert "handler" not in done.stdout and "register(" not in done.stdout
    up = resetgate("up", "--help", cwd=Path.cwd())
    assert "RESETGATE_HTTP_PORT" in up.stdout and "--port" in up.stdout


async def test_ops_show_prints_iso_times_and_a_dash_for_nothing(
    redis: Redis,
    redis_server: RedisServer,
    settings: PolicySettings,
    token_keys: TokenKeys,
    tmp_path: Path,
) -> None:
    admitted = await Admitter(redis, settings, token_keys).admit("acct-show", "public")
    env = {"RESETGATE_REDIS_URL": redis_server.url, "RESETGATE_PARTITIONS": "4"}
    done = resetgate("ops", "show", admitted.operation_id, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "None" not in text and not re.search(r"\b1\d{12}\b", text), "epoch ms or None"
    assert re.search(r"created_at\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", text)
    assert re.search(r"token_consumed_at\s+—", text) and re.search(r"attempt ledger\s+—", text)


def test_a_closed_pipe_ends_quietly(tmp_path: Path, redis_server: RedisServer) -> None:
    """`resetgate ops status | head -1`: the reader is gone before the table is written."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("RESETGATE_")}
    read, write = os.pipe()
    os.close(read)  # nobody will read: the first write gets EPIPE
    try:
        done = subprocess.run(
            [sys.executable, "-m", "services.ctl.main", "ops", "status"],
            env={**base, "RESETGATE_REDIS_URL": redis_server.url},
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            cwd=tmp_path,
            check=False,
        )
    finally:
        os.close(write)
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
    assert done.returncode == 1


def test_no_stack_and_no_redis_url_is_a_refusal_not_the_machines_own_redis(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """This machine has a Redis on 127.0.0.1:6379: an all-zero table read from it looked like
    an answer about the stack."""
    monkeypatch.setattr(stack, "PROJECT_ROOT", tmp_path)  # no checkout's .run/ either
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("RESETGATE_")]:
        monkeypatch.delenv(name)
    with pytest.raises(stack.StackError) as refused:
        stack.use_local_stack()
    message = str(refused.value)
    assert message.startswith("error: no Redis to talk to: RESETGATE_REDIS_URL is unset")
    assert "make run" in message and "RESETGATE_REDIS_URL" in message


def test_ops_status_outside_any_checkout_refuses_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from services.ctl import main, stack; "
            f"stack.PROJECT_ROOT = stack.Path({str(tmp_path)!r}); "
            "sys.argv = ['resetgate', 'ops', 'status']; main.main()",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith("RESETGATE_")},
    )
    assert done.returncode == 1, done.stdout
    assert done.stdout == "", "no table from a Redis nobody chose"
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert done.stderr.startswith("error: no Redis to talk to")

"""`resetgate up` (what `make run` runs): the whole stack comes up and delivers a reset; Ctrl-C
stops services before Redis; any child dying (Redis included) stops the stack with its cause;
ports come from RESETGATE_HTTP_PORT or --port and a busy one is named before anything starts."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import pytest

from services.ctl import ports, stack, up
from services.ctl.banner import DEMO_ACCOUNTS
from services.ctl.embedded import STACK_PORTS, bindable

if TYPE_CHECKING:
    from tests.ctl.conftest import Stack

# How long a stack may take to print its banner: about 10 CPU-seconds of start-up, which a
# machine running the whole suite beside other work stretched past three minutes (load 30).
BANNER_S = 300
# How long a reset may take to reach the state a test waits for, on such a machine.
SETTLE_S = 180


def free_stack_port() -> int:
    """A port for `resetgate up --port` with every fixed offset from it free (the archive's
    and each sandbox's included). Blocks are drawn from ``STACK_PORTS``, where no single
    port is drawn, and each xdist worker has blocks of its own: a port found free here is
    not taken by another test's server before this stack binds it."""
    span = max(*ports.PORT_OFFSETS.values(), ports.SANDBOX_OFFSET + ports.MAX_PROVIDERS) + 1
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
    blocks = list(range(STACK_PORTS.start, STACK_PORTS.stop - span, span))[worker::workers]
    random.shuffle(blocks)
    for port in blocks:
        if all(bindable(port + offset) for offset in range(span)):
            return port
    raise AssertionError(f"no free block of {span} ports for worker {worker}")


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESETGATE_")}
    return {**env, **extra}


async def start_up(
    directory: Path, *args: str, archive: bool = False, **env: str
) -> asyncio.subprocess.Process:
    """``resetgate up --no-archive`` unless ``archive``: a local PostgreSQL, its migration and
    the archiver are a third of a stack's start-up CPU, and only the tests that look at the
    archive need them (test_up_prometheus.py; the quick start runs `make run` as it is)."""
    # A process group of its own, so the test can do what a terminal's Ctrl-C does: SIGINT to
    # the whole foreground group (resetgate up and every child still in that group).
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "services.ctl.main",
        "up",
        "--dir",
        str(directory),
        *args,
        *([] if archive else ["--no-archive"]),
        env=child_env(**env),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )


async def read_banner(process: asyncio.subprocess.Process) -> str:
    assert process.stdout is not None
    lines: list[str] = []
    while not any(line.startswith("Ctrl-C") for line in lines):
        line = (await process.stdout.readline()).decode()
        if not line:
            assert process.stderr is not None
            error = (await process.stderr.read()).decode()
            raise AssertionError(f"resetgate up exited before printing its banner: {error}")
        lines.append(line)
    return "".join(lines)


async def up_on_free_ports(
    directory: Path, *args: str, archive: bool = False
) -> tuple[int, asyncio.subprocess.Process, str]:
    """Start the stack on a free block of ports and read its banner. Another test worker may
    take a drawn port before the stack binds it (the stack then refuses, naming it): draw
    again, up to three times. A stack that never printed its banner is stopped, never left
    running (and using CPU) for the rest of the run."""
    for _ in range(3):
        port = free_stack_port()
        process = await start_up(directory, "--port", str(port), *args, archive=archive)
        try:
            return port, process, await asyncio.wait_for(read_banner(process), timeout=BANNER_S)
        except AssertionError as error:
            if "already in use" not in str(error):
                raise
        except BaseException:
            await stop_group(process)
            raise
    raise AssertionError("three drawn blocks of ports were taken before the stack bound them")


async def stop_group(process: asyncio.subprocess.Process) -> None:
    """Ctrl-C to a stack that is still running, and wait for it to finish stopping."""
    if process.returncode is None:
        os.killpg(process.pid, signal.SIGINT)
        await asyncio.wait_for(process.communicate(), timeout=90)


async def reset_is_accepted(
    base: str, token: str, login: str = "player1", account: str = "acct-1001"
) -> dict[str, Any]:
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{base}/v1/password-resets", json={"login": login}) as r:
            assert r.status == 202
        headers = {"Authorization": f"Bearer {token}"}
        url = f"{base}/internal/v1/accounts/{account}/recovery-operation"
        view: dict[str, Any] = {}
        deadline = time.monotonic() + SETTLE_S
        while time.monotonic() < deadline:
            async with session.get(url, headers=headers) as r:
                view = await r.json()
            if r.status == 200 and view.get("state") == "accepted":
                break
            await asyncio.sleep(0.2)
        return view


def redis_pid(port: int) -> int:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            # redis-server retitles itself "redis-server 127.0.0.1:PORT".
            if b"redis-server" in cmdline and f"127.0.0.1:{port}".encode() in cmdline:
                return int(entry.name)
    raise AssertionError(f"no redis-server on port {port}")


def redis_errors(directory: Path) -> list[str]:
    return [
        line
        for name in up.SERVICES
        for line in (directory / f"{name}.log").read_text().splitlines()
        if "ConnectionError" in line or "redis unreachable" in line
    ]


def listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


async def status_of(url: str) -> int:
    async with aiohttp.ClientSession() as session, session.get(url) as reply:
        return reply.status


def a_running_stack_names_everything(directory: Path, port: int, banner: str) -> str:
    """The banner names every service, the demo accounts, the bearer (also in the env
    file) and the commands to try; its bearer."""
    for name in ("admission", "sender", "poller", "router", "sandbox", "redis"):
        assert name in banner
    for login, account, *_ in DEMO_ACCOUNTS:
        assert re.search(rf"^  {login}\s+{account}\b", banner, re.M), login
    token = re.search(r"Bearer ([^'\s]+)", banner)
    assert token is not None
    assert f"token      {token.group(1)} " in banner
    assert "resetgate ops status" in banner and "export PATH=" in banner
    env_file = stack.read_env(directory / "env")
    assert env_file["RESETGATE_INTERNAL_API_TOKEN"] == token.group(1)
    assert env_file["RESETGATE_ADMISSION_URL"] == f"http://127.0.0.1:{port}"
    return token.group(1)


async def a_running_stack_delivers_and_serves_its_listeners(
    port: int, banner: str, token: str
) -> None:
    view = await reset_is_accepted(f"http://127.0.0.1:{port}", token)
    assert view["state"] == "accepted"
    assert await status_of(f"http://127.0.0.1:{port}/metrics") == 404  # the API's port
    for ops_port in range(port + 1, port + 5):  # every service's operational listener
        assert f"http://127.0.0.1:{ops_port}  (/healthz /readyz /metrics)" in banner
        assert await status_of(f"http://127.0.0.1:{ops_port}/metrics") == 200
    # Without --prometheus no Prometheus runs (test_up_prometheus.py runs one with it).
    assert "prometheus" not in banner
    assert not listening(port + ports.PORT_OFFSETS["prometheus"])


def ctrl_c_stopped_services_before_redis(directory: Path, stderr: str) -> None:
    """What a stack stopped by Ctrl-C (:func:`ctrl_c`: exit 0) leaves: no traceback, no env
    file, and no service that met a Redis already gone."""
    assert "Traceback" not in stderr
    assert not (directory / "env").exists(), "the env file of a stopped stack must go"
    assert redis_errors(directory) == [], "Redis stopped before the services"


async def test_a_busy_port_is_named_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        process = await start_up(tmp_path, "--port", str(port))
        _, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
    lines = stderr.decode().strip().splitlines()
    assert process.returncode == 1
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"port {port} (admission) is already in use")
    assert "RESETGATE_HTTP_PORT=" in lines[0]


@pytest.mark.timeout(600)
async def test_a_service_that_cannot_start_is_one_line_with_its_cause_and_log(
    tmp_path: Path,
) -> None:
    process = await start_up(
        tmp_path, RESETGATE_HTTP_PORT=str(free_stack_port()), RESETGATE_MAX_ATTEMPTS="0"
    )
    _, stderr = await asyncio.wait_for(process.communicate(), timeout=BANNER_S)
    lines = stderr.decode().strip().splitlines()
    assert process.returncode == 1
    assert len(lines) == 1, lines
    found = re.fullmatch(
        r"(\w+) exited with 2: invalid configuration: RESETGATE_MAX_ATTEMPTS"
        r".*; log: (\S+)",
        lines[0],
    )
    assert found, lines[0]
    assert found.group(2) == f"{tmp_path}/{found.group(1)}.log"


def test_port_comes_from_the_flag_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESETGATE_HTTP_PORT", "18080")
    assert ports.requested_port(argparse.Namespace(port=None)) == 18080
    assert ports.requested_port(argparse.Namespace(port=19000)) == 19000
    assert ports.plan_ports(18080) == {
        "sandbox": 18090,
        "admission": 18080,
        "admission ops": 18081,
        "sender ops": 18082,
        "poller ops": 18083,
        "router ops": 18084,
        "console": 18086,
        "redis": 18087,
    }
    pushed = ports.plan_ports(8080, "postmark", ["a", "b"])
    assert (pushed["webhooks"], pushed["sandbox a"], pushed["sandbox b"]) == (8085, 8090, 8091)
    monkeypatch.setenv("RESETGATE_HTTP_PORT", "eighty")
    with pytest.raises(SystemExit, match="RESETGATE_HTTP_PORT"):
        ports.requested_port(argparse.Namespace(port=None))


def test_the_local_secrets_are_made_once_and_kept(tmp_path: Path) -> None:
    first = up.local_secrets(tmp_path)
    assert up.local_secrets(tmp_path) == first
    assert (tmp_path / up.SECRETS_FILE).stat().st_mode & 0o077 == 0
    assert len(first["RESETGATE_INTERNAL_API_TOKEN"]) >= 16


async def ctrl_c(process: asyncio.subprocess.Process) -> str:
    os.killpg(process.pid, signal.SIGINT)
    _, stderr = await asyncio.wait_for(process.communicate(), timeout=90)
    assert process.returncode == 0, stderr.decode()
    return stderr.decode()


async def sandbox_messages(sandbox: str, operation_id: str) -> list[dict[str, Any]]:
    url = f"{sandbox}/_sandbox/messages?operation_id={operation_id}"
    async with aiohttp.ClientSession() as session, session.get(url) as reply:
        assert reply.status == 200, await reply.text()
        return list((await reply.json())["data"])


async def test_a_provider_kind_the_sandbox_cannot_speak_is_one_line_naming_it(
    tmp_path: Path,
) -> None:
    process = await start_up(
        tmp_path, "--port", str(free_stack_port()), RESETGATE_PROVIDER_KIND="postmrk"
    )
    _, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
    lines = stderr.decode().strip().splitlines()
    assert process.returncode == 1
    assert len(lines) == 1, lines
    assert lines[0].startswith("invalid configuration: RESETGATE_PROVIDER_KIND: 'postmrk'")
    assert "pydantic" not in lines[0]


async def account_view(base: str, token: str, account: str, delivery: str) -> dict[str, Any]:
    url = f"{base}/internal/v1/accounts/{account}/recovery-operation"
    view: dict[str, Any] = {}
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as session:
        deadline = time.monotonic() + SETTLE_S
        while time.monotonic() < deadline:
            async with session.get(url) as reply:
                view = await reply.json()
            if view.get("delivery") == delivery:
                break
            await asyncio.sleep(0.2)
    return view


@pytest.mark.timeout(600)  # the first test on the shared stack starts it
async def test_postmark_mode_shows_a_bounce_through_its_webhook_and_names_everything(
    postmark_stack: Stack,
) -> None:
    """Postmark has no event feed: a bounce reaches the store only through its webhook."""
    port, banner = postmark_stack.port, postmark_stack.banner
    sandbox = f"http://127.0.0.1:{port + ports.SANDBOX_OFFSET}"
    assert "provider   postmark: the sandbox speaking postmark's API, its signed webhooks" in banner
    assert f"console    http://127.0.0.1:{port + ports.CONSOLE_OFFSET}" in banner
    assert f"inbox      {sandbox}/_sandbox/inbox" in banner
    env_file = stack.read_env(postmark_stack.directory / "env")
    assert env_file["RESETGATE_PROVIDER_KIND"] == "postmark"
    assert env_file["RESETGATE_CONSOLE_URL"] == f"http://127.0.0.1:{port + 6}"
    base, token = env_file["RESETGATE_ADMISSION_URL"], env_file["RESETGATE_INTERNAL_API_TOKEN"]
    async with aiohttp.ClientSession() as session:
        body = {"login": "bounce-me"}
        async with session.post(f"{base}/v1/password-resets", json=body) as reply:
            assert reply.status == 202
        async with session.get(env_file["RESETGATE_CONSOLE_URL"] + "/sign-in") as reply:
            assert reply.status == 200
    view = await account_view(base, token, "acct-1003", "bounced")
    assert view["delivery"] == "bounced", view


def provider_command(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`resetgate ops provider ...` from a second shell that has only the env file."""
    return subprocess.run(
        [sys.executable, "-m", "services.ctl.main", "ops", "provider", *args],
        env=child_env(RESETGATE_RUN_DIR=str(directory)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def provider_show(directory: Path) -> dict[str, list[int]]:
    done = provider_command(directory, "show", "--json")
    assert done.returncode == 0, done.stderr
    return {row["provider"]: row["partitions"] for row in json.loads(done.stdout)["providers"]}


@pytest.mark.timeout(900)
async def test_two_providers_run_locally_and_a_plain_restart_leaves_no_partition_behind(
    tmp_path: Path,
) -> None:
    """Also `resetgate up`'s own test, on these two stacks (each a stack of its own before):
    Ctrl-C stops the first's services before its Redis, and the plain restart, with the http
    provider, names everything and delivers a reset. A reset through a stack of another kind
    (mailgun's API and event feed) is in test_up_second_shell.py, on the restart that
    changes the kind."""
    port, process, banner = await up_on_free_ports(tmp_path, "--providers", "primary,standby")
    try:
        assert f"sandbox standby http://127.0.0.1:{port + ports.SANDBOX_OFFSET + 1}" in banner
        assert stack.read_env(tmp_path / "env")["RESETGATE_PROVIDERS"] == "primary,standby"
        assert provider_show(tmp_path)["standby"] == []
        switch = provider_command(tmp_path, "switch", "--partitions", "0-1", "--to", "standby")
        assert switch.returncode == 0, switch.stderr
        assert provider_show(tmp_path)["standby"] == [0, 1]
    finally:
        stderr = await ctrl_c(process)
    ctrl_c_stopped_services_before_redis(tmp_path, stderr)
    plain = await start_up(tmp_path, "--port", str(port))
    try:
        banner = await asyncio.wait_for(read_banner(plain), timeout=BANNER_S)
        assert (
            "partitions 0 (standby), 1 (standby) were assigned to a provider not "
            "configured now: back to http" in banner
        )
        token = a_running_stack_names_everything(tmp_path, port, banner)
        assert provider_show(tmp_path) == {"http": list(range(16))}
        await a_running_stack_delivers_and_serves_its_listeners(port, banner, token)
        # This stack ends as no terminal ends it: its embedded Redis dies.
        await the_embedded_redis_dying_stops_the_stack_with_its_cause(tmp_path, plain)
    finally:
        if plain.returncode is None:
            await ctrl_c(plain)


async def the_embedded_redis_dying_stops_the_stack_with_its_cause(
    directory: Path, process: asyncio.subprocess.Process
) -> None:
    """SIGKILL to the running stack's embedded Redis: the stack stops every service and
    exits 1, naming Redis's exit and its log (a stack of its own for this alone would be one
    more start-up of every service)."""
    redis_port = int(
        stack.read_env(directory / "env")["RESETGATE_REDIS_URL"].split(":")[2].split("/")[0]
    )
    os.kill(redis_pid(redis_port), signal.SIGKILL)
    _, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
    text = stderr.decode()
    assert process.returncode == 1, text
    assert "stopping everything: redis exited with -9: " in text
    assert f"log: {directory}/redis/redis.log" in text

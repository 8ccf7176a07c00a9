"""`resetgate ops provider`: show, switch and rollback as real processes on a real Redis,
and every refusal the switch owes on-call."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from typing import Any

import pytest
from redis.asyncio import Redis

from services.ctl.embedded import RedisServer
from shared import codec, control, ownership, progressive, switch
from shared.admit import Admitter
from shared.keys import JOB_FIELD, SEND_GROUP, PartitionKeys
from shared.operations import load_operation
from shared.scripts.attempts import BeginAttempt, BeginCode
from shared.settings import PolicySettings
from shared.tokens import TokenKeys


def env(server: RedisServer) -> dict[str, str]:
    values = {k: v for k, v in os.environ.items() if not k.startswith("RESETGATE_")}
    values.update(
        RESETGATE_REDIS_URL=server.url,
        RESETGATE_PARTITIONS="4",
        RESETGATE_PROVIDERS="primary,standby",
    )
    return values


def provider(server: RedisServer, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "services.ctl.main", "ops", "provider", *args],
        env=env(server),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def progressive_switch(server: RedisServer, *args: str) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable,
        "-m",
        "services.ctl.main",
        "ops",
        "provider",
        "switch",
        "--progressive",
        *args,
    ]
    return subprocess.run(
        command,
        env={**env(server), "RESETGATE_PROGRESSIVE_WINDOW_SECONDS": "0.2"},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def show(server: RedisServer) -> Any:
    done = provider(server, "show", "--json")
    assert done.returncode == 0, done.stderr
    return codec.loads(done.stdout)


async def test_switch_moves_partitions_and_rollback_moves_them_back(
    redis: Redis, redis_server: RedisServer
) -> None:
    before = show(redis_server)["providers"]
    assert [(r["provider"], r["partitions"]) for r in before] == [
        ("primary", [0, 1, 2, 3]),
        ("standby", []),
    ]
    done = provider(redis_server, "switch", "--partitions", "0-1", "--to", "standby")
    assert done.returncode == 0, done.stderr
    state = await control.read(redis)
    assert state.providers == {0: "standby", 1: "standby"} and not state.paused
    assert state.switch is None
    rows = {r["provider"]: r["partitions"] for r in show(redis_server)["providers"]}
    assert rows == {"primary": [2, 3], "standby": [0, 1]}
    assert provider(redis_server, "rollback").returncode == 0
    state = await control.read(redis)
    assert state.providers == {0: "primary", 1: "primary"} and not state.paused
    again = provider(redis_server, "rollback")  # it used to re-apply the switch
    assert again.returncode == 1, again
    assert again.stderr.splitlines()[-1].startswith("nothing to roll back"), again.stderr
    state = await control.read(redis)
    assert state.providers == {0: "primary", 1: "primary"} and not state.paused


async def test_switch_keeps_a_partition_paused_by_someone_else_paused(
    redis: Redis, redis_server: RedisServer
) -> None:
    await control.pause_partitions(redis, [1], "incident 7")
    assert (
        provider(redis_server, "switch", "--partitions", "0-1", "--to", "standby").returncode == 0
    )
    state = await control.read(redis)
    assert state.paused == {1} and state.paused_notes[1]["reason"] == "incident 7"


async def test_switching_to_an_unconfigured_provider_is_refused(
    redis: Redis, redis_server: RedisServer
) -> None:
    done = provider(redis_server, "switch", "--partitions", "0", "--to", "backup")
    assert done.returncode == 1 and "'backup' is not configured" in done.stderr
    assert "Traceback" not in done.stderr
    state = await control.read(redis)
    assert state.providers == {} and not state.paused and state.switch is None


async def test_switching_to_a_provider_paused_by_credentials_is_refused(
    redis: Redis, redis_server: RedisServer
) -> None:
    await control.auth_pause(redis, "standby", 401, "abc")
    done = provider(redis_server, "switch", "--partitions", "0-3", "--to", "standby")
    assert done.returncode == 1 and "paused by credentials" in done.stderr
    assert (await control.read(redis)).providers == {}
    rows = {r["provider"]: r for r in show(redis_server)["providers"]}
    assert rows["standby"]["paused_by_credentials"] and not rows["primary"]["paused_by_credentials"]


async def ambiguous_at(
    redis: Redis, settings: PolicySettings, token_keys: TokenKeys, account: str, name: str
) -> str:
    """An operation whose attempt at ``name`` lost its holder: unresolved-ambiguous there."""
    op = (await Admitter(redis, settings, token_keys).admit(account, "public")).operation_id
    common: dict[str, Any] = dict(
        max_attempts=6, consumer="t", entry_id="", retention_ms=60_000, provider=name
    )
    await BeginAttempt(operation_id=op, attempt_id="a1", now=1, lease_ms=1, **common).run(redis)
    # The holder "died": its lease is long gone when the next look finds the attempt.
    took = await BeginAttempt(
        operation_id=op, attempt_id="a2", now=10**13, lease_ms=1, **common
    ).run(redis)
    assert took.code is BeginCode.AMBIGUOUS
    return op


async def test_unresolved_ambiguity_at_the_old_provider_does_not_hold_up_the_switch(
    redis: Redis, redis_server: RedisServer, settings: PolicySettings, token_keys: TokenKeys
) -> None:
    op = await ambiguous_at(redis, settings, token_keys, "acct-1", "primary")
    partition = PartitionKeys.of(op).partition
    done = provider(redis_server, "switch", "--partitions", "0-3", "--to", "standby")
    assert done.returncode == 0, done.stderr
    state = await control.read(redis)
    assert state.providers == dict.fromkeys(range(4), "standby") and not state.paused
    # The operation stays with the provider that holds its attempt, and on-call sees it.
    operation = await load_operation(redis, op)
    assert operation is not None and operation.state == "ambiguous"
    assert ownership.owner(operation, state, "primary").provider == "primary"
    held = show(redis_server)["held_by_old_provider"]
    assert held == [
        {
            "operation_id": op,
            "partition": partition,
            "owner": "primary",
            "partition_provider": "standby",
        }
    ]
    text = provider(redis_server, "show").stdout
    assert f"{op}  partition {partition}  owner primary" in text


async def test_a_switch_killed_half_way_converges_when_run_again(
    redis: Redis, redis_server: RedisServer
) -> None:
    # One job of partition 0 read and not acknowledged: the switch has to wait for it.
    stream = PartitionKeys(0).send
    await redis.xgroup_create(stream, SEND_GROUP, id="0", mkstream=True)
    entry = await redis.xadd(stream, {JOB_FIELD: "x"})
    await redis.xreadgroup(SEND_GROUP, "sender-1", {stream: ">"})
    args = ["switch", "--partitions", "0-1", "--to", "standby", "--timeout", "60"]
    command = [sys.executable, "-m", "services.ctl.main", "ops", "provider", *args]
    process = await asyncio.create_subprocess_exec(
        *command, env=env(redis_server), stdout=subprocess.DEVNULL
    )
    try:  # a loaded machine takes seconds to start the process: wait on the pause itself
        deadline = asyncio.get_running_loop().time() + 60
        while asyncio.get_running_loop().time() < deadline:
            if (await control.read(redis)).paused == {0, 1}:
                break
            await asyncio.sleep(0.05)
    finally:
        process.send_signal(signal.SIGKILL)
        await asyncio.wait_for(process.wait(), timeout=10)
    state = await control.read(redis)
    assert state.switch is not None and state.paused == {0, 1} and state.providers == {}
    other = provider(redis_server, "switch", "--partitions", "2", "--to", "standby")
    assert other.returncode == 1 and "another switch is in progress" in other.stderr
    await redis.xack(stream, SEND_GROUP, entry)
    again = provider(redis_server, *args)
    assert again.returncode == 0, again.stderr
    state = await control.read(redis)
    assert state.providers == {0: "standby", 1: "standby"}
    assert not state.paused and state.switch is None


async def test_switching_away_from_a_paused_provider_that_holds_ambiguity_is_the_failover(
    redis: Redis, redis_server: RedisServer, settings: PolicySettings, token_keys: TokenKeys
) -> None:
    # Its lookups are refused while its key is: the ambiguous attempt waits there for the
    # key, and everything else of the partitions moves on.
    op = await ambiguous_at(redis, settings, token_keys, "acct-2", "primary")
    await control.auth_pause(redis, "primary", 401, "abc")
    done = provider(redis_server, "switch", "--partitions", "0-3", "--to", "standby")
    assert done.returncode == 0, done.stderr
    assert (await control.read(redis)).providers == dict.fromkeys(range(4), "standby")
    assert [h["operation_id"] for h in show(redis_server)["held_by_old_provider"]] == [op]


async def test_switching_away_from_a_paused_provider_with_nothing_ambiguous_is_the_failover(
    redis: Redis, redis_server: RedisServer
) -> None:
    await control.auth_pause(redis, "primary", 401, "abc")
    done = provider(redis_server, "switch", "--partitions", "0-3", "--to", "standby")
    assert done.returncode == 0, done.stderr
    assert (await control.read(redis)).providers == dict.fromkeys(range(4), "standby")


async def test_a_switch_killed_half_way_with_ambiguity_at_the_old_provider_converges(
    redis: Redis, redis_server: RedisServer, settings: PolicySettings, token_keys: TokenKeys
) -> None:
    op = await ambiguous_at(redis, settings, token_keys, "acct-3", "primary")
    stream = PartitionKeys(0).send  # one job read and not acknowledged holds the switch
    await redis.xgroup_create(stream, SEND_GROUP, id="0", mkstream=True)
    entry = await redis.xadd(stream, {JOB_FIELD: "x"})
    await redis.xreadgroup(SEND_GROUP, "sender-1", {stream: ">"})
    args = ["switch", "--partitions", "0-3", "--to", "standby", "--timeout", "60"]
    command = [sys.executable, "-m", "services.ctl.main", "ops", "provider", *args]
    process = await asyncio.create_subprocess_exec(
        *command, env=env(redis_server), stdout=subprocess.DEVNULL
    )
    try:
        deadline = asyncio.get_running_loop().time() + 60  # a loaded machine starts slowly
        while asyncio.get_running_loop().time() < deadline:
            if (await control.read(redis)).paused == {0, 1, 2, 3}:
                break
            await asyncio.sleep(0.05)
    finally:
        process.send_signal(signal.SIGKILL)
        await asyncio.wait_for(process.wait(), timeout=10)
    assert (await control.read(redis)).switch is not None
    await redis.xack(stream, SEND_GROUP, entry)
    again = provider(redis_server, *args)
    assert again.returncode == 0, again.stderr
    state = await control.read(redis)
    assert state.providers == dict.fromkeys(range(4), "standby")
    assert not state.paused and state.switch is None
    operation = await load_operation(redis, op)
    assert operation is not None and operation.state == "ambiguous"
    assert ownership.owner(operation, state, "primary").provider == "primary"


async def test_a_target_paused_by_credentials_while_the_switch_waits_refuses_and_resumes(
    redis: Redis,
) -> None:
    names = ["primary", "standby"]
    plan = await switch.begin(redis, {0: "standby", 1: "standby"}, names)
    assert (await control.read(redis)).paused == {0, 1}
    await control.auth_pause(redis, "standby", 401, "abc")
    with pytest.raises(switch.SwitchRefused, match="paused by credentials"):
        await switch.finish(redis, plan, names)
    state = await control.read(redis)
    assert state.providers == {} and not state.paused and state.switch is None


@pytest.mark.timeout(300)  # three steps of real processes on a loaded machine
async def test_a_progressive_switch_with_no_sender_is_driven_by_the_command_itself(
    redis: Redis, redis_server: RedisServer
) -> None:
    # No sender holds the driver's lease: the command drives the switch in the foreground,
    # printing each step, and ends with every partition at the target (nothing to send, so
    # each step holds).
    done = progressive_switch(redis_server, "--to", "standby", "--reason", "drill")
    assert done.returncode == 0, done.stderr
    steps = [line for line in done.stdout.splitlines() if "holds:" in line]
    assert len(steps) == 3, done.stdout  # 1, 2, then the last 1 of 4 partitions
    assert "done: partitions" in done.stdout
    state = await control.read(redis)
    assert state.providers == dict.fromkeys(range(4), "standby") and not state.paused
    assert "progressive switch primary -> standby: done" in provider(redis_server, "show").stdout
    # Ended, it is history: nothing to stop; the manual rollback undoes the whole of it.
    stopped = provider(redis_server, "stop")
    assert stopped.returncode == 1 and "no progressive switch" in stopped.stderr
    assert provider(redis_server, "rollback").returncode == 0
    assert (await control.read(redis)).providers == dict.fromkeys(range(4), "primary")


async def test_a_progressive_switch_to_an_unknown_provider_is_refused(
    redis: Redis, redis_server: RedisServer
) -> None:
    done = provider(redis_server, "switch", "--to", "backup", "--progressive")
    assert done.returncode == 1 and "'backup' is not configured" in done.stderr
    assert await progressive.read(redis) is None
    missing = provider(redis_server, "switch", "--to", "standby")  # not progressive
    assert missing.returncode == 2 and "--partitions is required" in missing.stderr

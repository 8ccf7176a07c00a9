"""`resetgate ops` as on-call runs it: a real process against a real Redis."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from typing import Any

from redis.asyncio import Redis

from services.ctl.embedded import RedisServer
from shared import codec
from shared.admit import Admitter
from shared.control import read as read_control
from shared.keys import AUDIT, CONTROL, PartitionKeys
from shared.operations import load_operation
from shared.settings import PolicySettings
from shared.tokens import TokenKeys


def ops(server: RedisServer, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESETGATE_")}
    env.update(RESETGATE_REDIS_URL=server.url, RESETGATE_PARTITIONS="4", **extra)
    return subprocess.run(
        [sys.executable, "-m", "services.ctl.main", "ops", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def ops_json(server: RedisServer, *args: str, **extra: str) -> Any:
    done = ops(server, *args, "--json", **extra)
    assert done.returncode == 0, done.stderr
    return codec.loads(done.stdout)


async def admit(redis: Redis, settings: PolicySettings, keys: TokenKeys, n: int) -> list[str]:
    admitter = Admitter(redis, settings, keys)
    ids = []
    for i in range(n):
        ids.append((await admitter.admit(f"acct-{i}", "public")).operation_id)
        await asyncio.sleep(0.003)  # distinct creation milliseconds: a strict oldest-first order
    return ids


async def test_oldest_lists_one_row_per_operation_oldest_first(
    redis: Redis, redis_server: RedisServer, settings: PolicySettings, token_keys: TokenKeys
) -> None:
    ids = await admit(redis, settings, token_keys, 5)
    rows = ops_json(redis_server, "oldest", "--limit", "3")
    assert [r["operation_id"] for r in rows] == ids[:3]
    for row in rows:
        assert row["remaining_attempts"] == 6
        assert {"last_status", "next_attempt_at", "state", "age_seconds"} <= row.keys()
    text = ops(redis_server, "oldest").stdout
    assert all(op in text for op in ids)


async def test_show_prints_state_and_ledger_and_fails_cleanly_on_unknown_ids(
    redis: Redis, redis_server: RedisServer, settings: PolicySettings, token_keys: TokenKeys
) -> None:
    [op] = await admit(redis, settings, token_keys, 1)
    view = ops_json(redis_server, "show", op)
    assert view["state"] == "queued" and view["attempt_ledger"] == []
    missing = ops(redis_server, "show", "op-1-NOPE")
    assert missing.returncode == 1 and "no operation" in missing.stderr
    assert "Traceback" not in missing.stderr


async def test_show_finds_an_accounts_operation_and_names_an_account_without_one(
    redis: Redis, redis_server: RedisServer, settings: PolicySettings, token_keys: TokenKeys
) -> None:
    ops_ids = await admit(redis, settings, token_keys, 2)
    assert ops_json(redis_server, "show", "--account", "acct-1")["operation_id"] == ops_ids[1]
    none = ops(redis_server, "show", "--account", "acct-nobody")
    assert none.returncode == 1
    assert none.stderr.splitlines()[-1] == "no operation for account acct-nobody"
    both = ops(redis_server, "show", ops_ids[0], "--account", "acct-1")
    assert both.returncode == 2 and "not allowed with" in both.stderr, "one or the other"


async def test_pause_resume_and_status(redis: Redis, redis_server: RedisServer) -> None:
    assert ops(redis_server, "pause", "2", "--reason", "incident 42").returncode == 0
    assert (await read_control(redis)).paused == {2}
    status = ops_json(redis_server, "status")
    assert [p["paused"] for p in status["partitions"]] == [False, False, True, False]
    assert ops(redis_server, "resume", "--all").returncode == 0
    assert (await read_control(redis)).paused == frozenset()
    bad = ops(redis_server, "pause", "9")
    assert bad.returncode != 0 and "between 0 and 3" in bad.stderr


async def test_quarantine_and_release_keep_the_operation_id(
    redis: Redis, redis_server: RedisServer, settings: PolicySettings, token_keys: TokenKeys
) -> None:
    [op] = await admit(redis, settings, token_keys, 1)
    assert ops(redis_server, "quarantine", op, "--reason", "fraud check").returncode == 0
    held = await load_operation(redis, op)
    assert held is not None and held.state == "quarantined"
    assert ops(redis_server, "quarantine", op, "--reason", "again").returncode == 1
    assert ops(redis_server, "release", op).returncode == 0
    released = await load_operation(redis, op)
    assert released is not None and released.state == "queued"
    assert await redis.xlen(PartitionKeys.of(op).send) == 2  # admission's job + the release
    # Each action, done or refused, is recorded with who ran it (the console records its own).
    audit = [fields for _, fields in await redis.xrange(AUDIT)]
    assert [(a["action"], a["result"]) for a in audit] == [
        ("quarantine", "done"),
        ("quarantine", "refused:quarantined"),
        ("release", "done"),
    ]
    assert all(a["actor"].startswith("cli") for a in audit)


async def test_drain_returns_once_nothing_is_in_flight(redis_server: RedisServer) -> None:
    done = ops(redis_server, "drain", "1", "--timeout", "5")
    assert done.returncode == 0 and "drained" in done.stdout


async def test_show_escapes_what_would_drive_the_terminal(
    redis: Redis, redis_server: RedisServer, settings: PolicySettings, token_keys: TokenKeys
) -> None:
    """A quarantine reason and a provider's message id come from outside: an escape sequence
    (clear the screen, retitle the window) or a newline (a forged line) is printed escaped."""
    [op] = await admit(redis, settings, token_keys, 1)
    reason = "fraud\x1b[2J\x1b]0;owned\x07\nstate                  accepted"
    assert ops(redis_server, "quarantine", op, "--reason", reason).returncode == 0
    # As an older release stored a provider's answer: any 256 characters.
    await redis.hset(PartitionKeys.of(op).operation(op), "provider_message_id", "m\x9b2J\u202e1")
    for done in (ops(redis_server, "show", op), ops(redis_server, "show", op, "--json")):
        assert done.returncode == 0, done.stderr
        assert not any(c in done.stdout for c in "\x1b\x07\x9b\u202e"), done.stdout
        assert not any(
            line.startswith("state ") and "accepted" in line for line in done.stdout.splitlines()
        )
    shown = ops(redis_server, "show", op).stdout
    # The reason's control characters are dropped when it is recorded (actions.clean_reason);
    # a stored field that still has some is printed escaped.
    assert "fraud" in shown and "\\u202e" in shown, shown
    assert codec.loads(ops(redis_server, "show", op, "--json").stdout)["provider_message_id"] == (
        "m\x9b2J\u202e1"
    )


async def test_status_flags_a_partition_whose_provider_is_not_configured(
    redis: Redis, redis_server: RedisServer
) -> None:
    """Two operations sat queued with 0 attempts and status showed them as not paused."""
    await redis.hset(CONTROL, "provider:1", "primary")  # a run with two providers did it
    done = ops(redis_server, "status")
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if line.split()[0] == "1")
    assert row.endswith("primary (not configured)"), row
    assert (
        "warning: partitions 1 (primary) are assigned to a provider not configured" in done.stderr
    )
    rows = {r["partition"]: r for r in ops_json(redis_server, "status")["partitions"]}
    assert rows[1]["provider_configured"] is False and rows[0]["provider_configured"] is True


async def test_status_says_until_when_a_quota_pauses_the_provider_and_what_it_accepts(
    redis: Redis, redis_server: RedisServer
) -> None:
    from shared import clock, control
    from shared.keys import provider_pacing

    now = clock.now_ms()
    until = now + 3_600_000
    await control.quota_pause(redis, "default", until, "daily quota of 200 sends used up", "k")
    await redis.hset(
        provider_pacing("default"),
        mapping={"since": now - 10**9, "accepted": 10**6, "good": 0.95, "tat": now + 60_000},
    )
    [view] = ops_json(redis_server, "status")["providers"]
    assert view["paused_until"] == until and abs(view["accepting_rate"] - 1.0) < 0.002
    assert view["settled_rate"] == 0.95 and view["next_slot_at"] == now + 60_000
    text = ops(redis_server, "status").stdout
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(until / 1000))
    assert f"paused until {stamp} (daily quota)" in text and "accepting=1.00/s" in text


TWO_PROVIDERS = {
    "RESETGATE_PROVIDERS": "primary,standby",
    "RESETGATE_PROVIDER_PRIMARY_KIND": "http",
    "RESETGATE_PROVIDER_PRIMARY_API_KEY": "k1",
    "RESETGATE_PROVIDER_STANDBY_KIND": "postmark",
    "RESETGATE_PROVIDER_STANDBY_API_KEY": "k2",
    "RESETGATE_PROVIDER_STANDBY_URL": "http://127.0.0.1:9",
}


async def test_status_names_every_configured_provider_and_no_other(
    redis: Redis, redis_server: RedisServer
) -> None:
    """`ops status` printed a provider `http` that did not exist and neither configured one."""
    from shared import control
    from shared.keys import provider_pacing

    await redis.hset(CONTROL, "provider:3", "standby")
    await redis.zadd(PartitionKeys(3).ambiguous, {"op-x": 1})
    await control.provider_pause(redis, "primary", control.PauseKind.ACCOUNT, "domain suspended")
    await redis.hset(provider_pacing("standby"), mapping={"throttled_total": 7, "rate": 4.5})
    view = ops_json(redis_server, "status", **TWO_PROVIDERS)
    lines = {p["provider"]: p for p in view["providers"]}
    assert list(lines) == ["primary", "standby"]
    assert lines["primary"]["kind"] == "http" and lines["standby"]["kind"] == "postmark"
    assert lines["primary"]["partitions"] == [0, 1, 2] and lines["standby"]["partitions"] == [3]
    assert lines["primary"]["auth_paused"]["reason"] == "domain suspended"
    assert lines["standby"]["auth_paused"] is None and lines["standby"]["ambiguous"] == 1
    assert lines["standby"]["throttled_total"] == 7 and lines["standby"]["rate"] == 4.5
    assert lines["primary"]["checks"] is None  # the preflight checks are not read here yet
    text = ops(redis_server, "status", **TWO_PROVIDERS).stdout
    assert "provider primary (http): partitions=0,1,2" in text
    assert 'pause=PAUSED kind=account status=- reason="domain suspended"' in text
    assert "kind=account" in text and "provider standby (postmark): partitions=3" in text
    assert "default" not in text and "provider http" not in text


async def test_provider_resume_switch_and_rollback_are_in_the_audit_trail(
    redis: Redis, redis_server: RedisServer
) -> None:
    """The audit stream stayed empty after three switches and a rollback while a pause was
    recorded."""
    from shared import control

    await control.provider_pause(redis, "primary", control.PauseKind.REFUSALS, "refused alike")
    resumed = ops(redis_server, "provider-resume", "--provider", "primary", **TWO_PROVIDERS)
    assert resumed.returncode == 0 and "refusals pause lifted" in resumed.stdout
    again = ops(redis_server, "provider-resume", "--provider", "primary", **TWO_PROVIDERS)
    assert "was not paused" in again.stdout
    switched = ops(
        redis_server,
        "provider",
        "switch",
        "--partitions",
        "0-1",
        "--to",
        "standby",
        "--reason",
        "primary degraded",
        **TWO_PROVIDERS,
    )
    assert switched.returncode == 0, switched.stderr
    rolled = ops(redis_server, "provider", "rollback", **TWO_PROVIDERS)
    assert rolled.returncode == 0, rolled.stderr
    nothing = ops(redis_server, "provider", "rollback", **TWO_PROVIDERS)
    assert nothing.returncode == 1
    audit = [fields for _, fields in await redis.xrange(AUDIT)]
    assert [(a["action"], a["target"], a["result"].split(":")[0]) for a in audit] == [
        ("provider-resume", "provider:primary", "done"),
        ("provider-resume", "provider:primary", "refused"),
        ("provider-switch", "provider:standby", "done"),
        ("provider-rollback", "provider:primary", "done"),
        ("provider-rollback", "-", "nothing to roll back"),
    ]
    assert all(a["actor"].startswith("cli") for a in audit)
    assert audit[2]["partitions"] == "0,1" and audit[2]["providers"] == "primary,standby"
    assert audit[2]["reason"] == "primary degraded (0:primary->standby, 1:primary->standby)"
    assert audit[0]["reason"] == "refused alike"

"""``resetgate ops``: on-call's tools. Every row is one operation, never an average.

Reads ``RESETGATE_REDIS_URL`` (and ``RESETGATE_REDIS_CLUSTER``, ``RESETGATE_PARTITIONS``,
``RESETGATE_MAX_ATTEMPTS``) like the services do, so it sees what they see.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable
from typing import Any

from pydantic import Field

from services.ctl import providers
from services.ctl.commands import Handler, adder, group
from services.ctl.output import print_view as _print
from services.ctl.stack import StackError, use_local_stack, with_redis
from shared import actions, clock, control, operation_views
from shared.archive import ArchiveUnavailable, Evidence, maybe_pool
from shared.clock import to_seconds
from shared.preflight.store import Checked
from shared.redis import RedisClient
from shared.settings import (
    ArchiveSettings,
    CommonSettings,
    ProgressiveSettings,
    RetentionSettings,
    load,
)
from shared.status import (
    ProviderLine,
    describe_auth,
    describe_pacing,
    in_flight,
    partitions_status,
    provider_lines,
    recent_counts,
)


class OpsSettings(CommonSettings, RetentionSettings, ArchiveSettings, ProgressiveSettings):
    max_attempts: int = Field(default=6, ge=1)


def _run(handler: Handler) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        source = use_local_stack()
        settings = load(OpsSettings)
        return with_redis(settings, source, lambda client: handler(client, settings, args))

    return run


NONE = "—"  # one mark for "nothing here" in every human-readable column


def _when(ms: int | None) -> str:
    if not ms:
        return NONE
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(to_seconds(ms)))


def _field(name: str, value: Any) -> str:
    """One value of ``ops show`` as a person reads it: ISO times, "—" for nothing."""
    if name.endswith("_at"):
        return _when(value)
    if isinstance(value, dict):
        return " ".join(f"{k}={v}" for k, v in sorted(value.items())) or NONE
    return NONE if value in (None, "") else str(value)


def _partitions(args: argparse.Namespace, settings: OpsSettings) -> list[int]:
    if args.all:
        return list(range(settings.partitions))
    if args.partition is None or not 0 <= args.partition < settings.partitions:
        raise SystemExit(f"give a partition between 0 and {settings.partitions - 1}, or --all")
    return [args.partition]


def _failing_checks(found: Checked | None) -> list[str]:
    """A provider's failing preflight checks (`resetgate providers check`), with the fix."""
    if found is None:
        return []
    return [
        f"  check {c.check} FAILING ({_when(found.checked_at)}): {c.detail}" for c in found.failing
    ]


# -- views ---------------------------------------------------------------------------------
async def oldest(client: RedisClient, settings: OpsSettings, args: argparse.Namespace) -> int:
    rows = await operation_views.oldest_live(
        client, settings.partitions, args.limit * 4, settings.max_attempts, clock.now_ms()
    )
    if args.partition is not None:
        rows = [r for r in rows if r["partition"] == args.partition]
    rows = rows[: args.limit]
    header = f"{'OPERATION':<36} {'P':>3} {'STATE':<11} {'AGE s':>8} {'TRIES':>5} {'LEFT':>4} "
    header += f"{'LAST':>4} {'NEXT ATTEMPT':<20}"
    lines = [header] + [
        f"{r['operation_id']:<36} {r['partition']:>3} {r['state']:<11} {r['age_seconds']:>8.0f} "
        f"{r['attempts']:>5} {r['remaining_attempts']:>4} {r['last_status'] or NONE!s:>4} "
        f"{_when(r['next_attempt_at']):<20}"
        for r in rows
    ]
    _print(args, rows, lines if rows else ["no live operations"])
    return 0


async def show(client: RedisClient, settings: OpsSettings, args: argparse.Namespace) -> int:
    """One operation by its id, or an account's (its live one, else its last): Redis first,
    then the archive (RESETGATE_ARCHIVE_DSN) for what Redis let go."""
    operation_id = args.operation_id
    if args.account:
        operation_id = await operation_views.account_operation_id(
            client, args.account, settings.partitions
        )
        if operation_id is None:
            print(f"no operation for account {args.account}", file=sys.stderr)
            return 1
    async with maybe_pool(settings) as pool:
        try:
            found = await Evidence(client, pool, settings.partitions).operation(operation_id)
        except ArchiveUnavailable as error:
            raise StackError(
                f"Redis does not hold {operation_id} and the archive did "
                f"not answer ({error}): retry once it is back"
            ) from None
    if found is None:
        where = (
            "in Redis or the archive" if settings.archive_configured else "in Redis (no archive)"
        )
        print(f"no operation {operation_id} {where}", file=sys.stderr)
        return 1
    detail, source = found
    view = {**detail.view(settings.max_attempts), "source": source}
    lines = [f"{k:<22} {_field(k, v)}" for k, v in view.items() if k != "attempt_ledger"]
    lines.append(f"{'attempt ledger':<22} {'' if view['attempt_ledger'] else NONE}".rstrip())
    lines += [_ledger_line(row) for row in view["attempt_ledger"]]
    _print(args, view, lines)
    return 0


def _ledger_line(row: dict[str, Any]) -> str:
    line = (
        f"  #{row['number']} {row['attempt_id']} {row['outcome']:<10} "
        f"status={_field('', row['http_status'] or None)} started={_when(row['started_at'])} "
        f"ended={_when(row['ended_at'])} decision={_field('', row['decision'])} "
        f"retry_at={_when(row['retry_at'])} reason={_field('', row['reason'])} "
        f"template={_field('', row['template'])}"
    )
    if row["reconciled"]:
        line += f" reconciled={row['reconciled']} at {_when(row['reconciled_at'])}"
    return line


async def status(client: RedisClient, settings: OpsSettings, args: argparse.Namespace) -> int:
    state = await control.read(client)
    rows = await partitions_status(client, settings.partitions, state)
    kinds = providers.kinds(settings)
    names = list(kinds)
    for row in rows:
        row["provider"] = state.provider_for(row["partition"], names[0])
        row["provider_configured"] = row["provider"] in names
    lines_of = await provider_lines(client, kinds, state, rows)
    recent = await recent_counts(client, settings.partitions, clock.now_ms())
    summary = {
        "providers": [line.view() for line in lines_of],
        "partitions": rows,
        "recent": recent,
    }
    lines = [text for line in lines_of for text in _provider_text(line)]
    more = "+" if recent["capped"] else ""
    lines += [
        f"{name}: {c['hour']}{more} in the last hour, {c['day']}{more} in the last day"
        for name, c in recent.items()
        if name != "capped"
    ]
    lines.append(
        f"{'P':>3} {'PAUSED':<6} {'SEND':>6} {'INFLIGHT':>8} {'DUE':>6} {'AMBIG':>5} "
        f"{'REVIEW':>6} {'LIVE':>6} PROVIDER"
    )
    lines += [
        f"{r['partition']:>3} {'yes' if r['paused'] else 'no':<6} {r['send']:>6} "
        f"{r['in_flight']:>8} {r['due']:>6} {r['ambiguous']:>5} {r['review']:>6} {r['live']:>6} "
        f"{r['provider']}{'' if r['provider_configured'] else ' (not configured)'}"
        for r in rows
    ]
    _print(args, summary, lines)
    _warn_unserved(rows)
    return 0


def _provider_text(line: ProviderLine) -> list[str]:
    """A provider's two lines: what it is and serves, then what it is taking."""
    status = line.status
    owned = ",".join(map(str, line.partitions)) or NONE
    return [
        f"provider {line.name} ({line.kind}): partitions={owned} rate={status.rate:.1f}/s "
        f"blocked_until={_when(status.blocked_until)} 429s={status.throttled_total} "
        f"ambiguous={line.ambiguous} pause={describe_auth(status)} checks={_checks(line)}",
        f"  {describe_pacing(line.pacing, _when)}",
        *_failing_checks(line.checks),
    ]


def _checks(line: ProviderLine) -> str:
    if line.checks is None:
        return "not run yet"
    failing = len(line.checks.failing)
    return f"{failing} failing" if failing else f"{len(line.checks.checks)} passing or unknown"


def _warn_unserved(rows: list[dict[str, Any]]) -> None:
    """Not paused, not failing, nothing sent: a partition nobody serves must not look quiet."""
    unserved = [r for r in rows if not r["provider_configured"]]
    if unserved:
        listed = ", ".join(f"{r['partition']} ({r['provider']})" for r in unserved)
        print(
            f"warning: partitions {listed} are assigned to a provider not configured here: "
            "no sender sends them; `resetgate ops provider switch --partitions P --to NAME` "
            "moves them (docs/runbook.md#partition-provider-not-configured)",
            file=sys.stderr,
        )


# -- switches ------------------------------------------------------------------------------
async def pause(client: RedisClient, settings: OpsSettings, args: argparse.Namespace) -> int:
    partitions = _partitions(args, settings)
    await actions.pause(client, partitions, actions.cli_actor(), args.reason)
    print(f"paused {len(partitions)} partition(s): {partitions}; senders stop within ~1 s")
    return 0


async def resume(client: RedisClient, settings: OpsSettings, args: argparse.Namespace) -> int:
    partitions = _partitions(args, settings)
    await actions.resume(client, partitions, actions.cli_actor())
    print(f"resumed {len(partitions)} partition(s): {partitions}")
    return 0


async def drain(client: RedisClient, settings: OpsSettings, args: argparse.Namespace) -> int:
    """Pause, then wait until nothing of the partition is in flight."""
    partitions = _partitions(args, settings)
    await actions.pause(client, partitions, actions.cli_actor(), "drain")
    deadline = time.monotonic() + args.timeout
    while True:
        busy = {p: await in_flight(client, p) for p in partitions}
        if not any(busy.values()):
            print(f"drained {partitions}: paused, nothing in flight")
            return 0
        if time.monotonic() > deadline:
            print(f"still in flight after {args.timeout}s: {busy}", file=sys.stderr)
            return 1
        await asyncio.sleep(0.5)


def _held(args: argparse.Namespace, outcome: actions.ActionResult, target: str) -> int:
    if not outcome.done:
        print(f"refused: operation is {outcome.state}", file=sys.stderr)
        return 1
    print(f"{args.operation_id}: {outcome.state} -> {target}")
    return 0


async def quarantine(client: RedisClient, _: OpsSettings, args: argparse.Namespace) -> int:
    outcome = await actions.quarantine(client, args.operation_id, actions.cli_actor(), args.reason)
    return _held(args, outcome, "quarantined")


async def release(client: RedisClient, _: OpsSettings, args: argparse.Namespace) -> int:
    outcome = await actions.release(client, args.operation_id, actions.cli_actor())
    return _held(args, outcome, "queued")


async def close(client: RedisClient, settings: OpsSettings, args: argparse.Namespace) -> int:
    outcome = await actions.close(
        client, args.operation_id, actions.cli_actor(), args.reason, settings.retention_ms
    )
    return _held(args, outcome, "failed (closed, not sent)")


async def provider_resume(
    client: RedisClient, settings: OpsSettings, args: argparse.Namespace
) -> int:
    provider = args.provider or settings.provider_name
    resumed = await actions.provider_resume(client, provider, actions.cli_actor())
    kind = resumed.kind
    print(f"provider {provider}: " + (f"{kind} pause lifted" if kind else "was not paused"))
    if resumed.probe:
        print(
            f"probe: {resumed.probe} sent again; {resumed.still_held} more held for review "
            "(`resetgate ops release OPERATION_ID` once the probe is accepted)"
        )
    return 0


async def review_list(client: RedisClient, settings: OpsSettings, args: argparse.Namespace) -> int:
    rows = await operation_views.held_for_review(client, settings.partitions)
    lines = [
        f"{r['operation_id']:<36} p{r['partition']:<3} since {_when(r['since'])}" for r in rows
    ]
    _print(args, rows, lines or ["nothing held for review"])
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ops = sub.add_parser("ops", help="on-call tools: oldest, show, status, pause, drain ...")
    cmds = ops.add_subparsers(dest="ops_command", required=True)
    add = adder(cmds, _run, json=True)
    p = add("oldest", oldest, "the oldest live operations, one row each")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--partition", type=int)
    p = add("show", show, "one operation: state and attempt ledger")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("operation_id", nargs="?")
    which.add_argument(
        "--account", metavar="ACCOUNT_ID", help="the account's live (else last) operation"
    )
    add("status", status, "partitions, depths, pacing and the auth pause")
    for name, handler in (("pause", pause), ("resume", resume)):
        p = add(name, handler, f"{name} sending for a partition (or --all)")
        p.add_argument("partition", type=int, nargs="?")
        p.add_argument("--all", action="store_true")
        p.add_argument("--reason", default="operator")
    p = add("drain", drain, "pause a partition and wait until nothing is in flight")
    p.add_argument("partition", type=int, nargs="?")
    p.add_argument("--all", action="store_true")
    p.add_argument("--timeout", type=float, default=60.0)
    p = add("quarantine", quarantine, "hold one operation (keeps its id and token)")
    p.add_argument("operation_id")
    p.add_argument("--reason", required=True)
    add("release", release, "return a quarantined or reviewed operation to the queue").add_argument(
        "operation_id"
    )
    p = add(
        "provider-resume",
        provider_resume,
        "lift the provider pause (credentials, account, refusals) once its cause is fixed",
    )
    p.add_argument("--provider")
    providers.register(cmds, _run)
    review = group(cmds, "review", "operations held for a person", _run)
    review("list", review_list, "operations held for review, oldest first", json=True)
    review("release", release, "send a reviewed operation again (same id and key)").add_argument(
        "operation_id"
    )
    p = review("close", close, "end a reviewed operation without sending it (failed)")
    p.add_argument("operation_id")
    p.add_argument("--reason", required=True)

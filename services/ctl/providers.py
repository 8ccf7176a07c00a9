"""``resetgate ops provider``: which provider serves which partition, and the switch.

Reads ``RESETGATE_PROVIDERS`` (or ``RESETGATE_PROVIDER_NAME`` alone) like the senders do, so
it knows the configured names; the assignment itself lives in the control record.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from services.ctl import progressive_cli
from services.ctl.commands import Run, Subcommands, group
from services.ctl.output import print_view as _print
from shared import actions, clock, control, operation_views, ownership, progressive, switch
from shared.keys import PartitionKeys
from shared.providers.named import ProviderConfigError, provider_kinds, provider_names
from shared.redis import RedisClient
from shared.settings import CommonSettings

SHOWN = 20  # held operations listed in the text view


def configured(settings: CommonSettings) -> list[str]:
    try:
        return provider_names(fallback=settings.provider_name)
    except ProviderConfigError as error:
        raise SystemExit(str(error)) from None


def kinds(settings: CommonSettings) -> dict[str, str]:
    """Each configured name and its kind, in order (the first serves by default)."""
    try:
        return provider_kinds(settings.provider_name)
    except ProviderConfigError as error:
        raise SystemExit(str(error)) from None


async def show(client: RedisClient, settings: Any, args: argparse.Namespace) -> int:
    names = configured(settings)
    state = await control.read(client)
    rows = await _rows(client, settings, state, names)
    held = await ownership.held_by_others(client, state, settings.partitions, names[0])
    view = {
        "providers": rows,
        "held_by_old_provider": [
            {
                "operation_id": h.operation_id,
                "partition": h.partition,
                "owner": h.owner,
                "partition_provider": h.current,
            }
            for h in held
        ],
        "switch_in_progress": state.switch,
        "previous": {str(p): n for p, n in (await switch.previous(client)).items()},
        "progressive": plan.record() if (plan := await progressive.read(client)) else None,
    }
    lines = [f"{'PROVIDER':<16} {'PARTITIONS':<24} {'QUEUE AGE s':>11} {'AMBIG':>5} CREDENTIALS"]
    lines += [
        f"{r['provider']:<16} {_list(r['partitions']):<24} {r['queue_age_seconds']:>11.0f} "
        f"{r['ambiguous']:>5} {'PAUSED' if r['paused_by_credentials'] else 'ok'}"
        + ("" if r["configured"] else "  (not configured)")
        for r in rows
    ]
    lines += _held_lines(held)
    if state.switch:
        lines.append(
            "switch in progress (run the same switch again to finish it): "
            + str(state.switch.get("targets"))
        )
    lines += progressive_cli.lines(plan)
    _print(args, view, lines)
    return 0


def _held_lines(held: list[ownership.Held]) -> list[str]:
    """Operations still owned by the provider their partition switched away from."""
    if not held:
        return []
    lines = [
        f"{len(held)} operation(s) still owned by the old provider (an unresolved ambiguous "
        "attempt: settled there, never sent elsewhere until proven unsent):"
    ]
    lines += [
        f"  {h.operation_id}  partition {h.partition}  owner {h.owner}  (partition now {h.current})"
        for h in held[:SHOWN]
    ]
    if len(held) > SHOWN:
        lines.append(f"  ... and {len(held) - SHOWN} more (--json lists them all)")
    return lines


async def _rows(
    client: RedisClient, settings: Any, state: control.ControlState, names: list[str]
) -> list[dict[str, Any]]:
    by_name: dict[str, list[int]] = {n: [] for n in names}
    for p in range(settings.partitions):
        by_name.setdefault(state.provider_for(p, names[0]), []).append(p)
    oldest = await operation_views.oldest_live(
        client,
        settings.partitions,
        settings.partitions * 8,
        settings.max_attempts,
        clock.now_ms(),
    )
    age: dict[int, float] = {}
    for row in oldest:
        age.setdefault(int(row["partition"]), float(row["age_seconds"]))
    rows = []
    for name, partitions in by_name.items():
        ambiguous = [int(await client.zcard(PartitionKeys(p).ambiguous)) for p in partitions]
        rows.append(
            {
                "provider": name,
                "configured": name in names,
                "partitions": partitions,
                "queue_age_seconds": max((age.get(p, 0.0) for p in partitions), default=0.0),
                "ambiguous": sum(ambiguous),
                "paused_by_credentials": name in state.auth_paused,
            }
        )
    return rows


async def switch_to(client: RedisClient, settings: Any, args: argparse.Namespace) -> int:
    if args.partitions is None and not args.progressive:
        print(
            "--partitions is required (or --progressive: every partition, one first)",
            file=sys.stderr,
        )
        return 2
    try:
        partitions = (
            switch.parse_partitions(args.partitions, settings.partitions)
            if args.partitions
            else list(range(settings.partitions))
        )
    except ValueError as error:
        print(str(error), file=sys.stderr)
        return 2
    if args.progressive:
        return await progressive_cli.start(client, settings, args, partitions, configured(settings))
    return await _switch(client, {p: args.to for p in partitions}, settings, args)


async def stop(client: RedisClient, settings: Any, args: argparse.Namespace) -> int:
    return await progressive_cli.stop(client, settings, args, configured(settings))


async def rollback(client: RedisClient, settings: Any, args: argparse.Namespace) -> int:
    outcome = await actions.provider_rollback(
        client, configured(settings), args.timeout, actions.cli_actor(), args.reason
    )
    return _report(outcome)


async def _switch(
    client: RedisClient, targets: dict[int, str], settings: Any, args: argparse.Namespace
) -> int:
    print(f"pausing {_list(sorted(targets))}; waiting until nothing is in flight")
    outcome = await actions.provider_switch(
        client, targets, configured(settings), args.timeout, actions.cli_actor(), args.reason
    )
    return _report(outcome)


def _report(outcome: switch.Outcome) -> int:
    print(outcome.message, file=sys.stdout if outcome.done else sys.stderr)
    return 0 if outcome.done else 1


def _list(partitions: list[int]) -> str:
    return ",".join(map(str, partitions)) or "-"


def register(cmds: Subcommands, run: Run) -> None:
    provider = group(cmds, "provider", "provider per partition: show, switch, rollback", run)
    provider("show", show, "partitions, queue age and ambiguity per provider", json=True)
    p = provider("switch", switch_to, "move partitions to another provider, never sending twice")
    p.add_argument("--partitions", help="e.g. 0-1 or 0,3,5-7 (--progressive: default all)")
    p.add_argument("--to", required=True, help="a name from RESETGATE_PROVIDERS")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for in-flight")
    p.add_argument("--reason", default="", help="why, for the audit trail")
    progressive_cli.register_switch(p)
    progressive_cli.register_stop(provider("stop", stop, "stop the progressive switch under way"))
    p = provider("rollback", rollback, "go back to the assignment before the last switch")
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument("--reason", default="", help="why, for the audit trail")

"""``resetgate ops provider``: which provider serves which partition, and the switch.

Reads ``RESETGATE_PROVIDERS`` (or ``RESETGATE_PROVIDER_NAME`` alone) like the senders do, so
it knows the configured names; the assignment itself lives in the control record.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from services.ctl import switch
from services.ctl.output import print_view as _print
from shared import clock, control, operation_views, ownership
from shared.keys import CONTROL, PartitionKeys
from shared.providers.named import ProviderConfigError, provider_names
from shared.redis import RedisClient
from shared.settings import CommonSettings

SHOWN = 20  # held operations listed in the text view
Handler = Callable[[RedisClient, Any, argparse.Namespace], Awaitable[int]]


def configured(settings: CommonSettings) -> list[str]:
    try:
        return provider_names(fallback=settings.provider_name)
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
            {"operation_id": h.operation_id, "partition": h.partition, "owner": h.owner,
             "partition_provider": h.current} for h in held
        ],
        "switch_in_progress": state.switch,
        "previous": {str(p): n for p, n in (await switch.previous(client)).items()},
    }  # fmt: skip
    lines = [f"{'PROVIDER':<16} {'PARTITIONS':<24} {'QUEUE AGE s':>11} {'AMBIG':>5} CREDENTIALS"]
    lines += [
        f"{r['provider']:<16} {_list(r['partitions']):<24} {r['queue_age_seconds']:>11.0f} "
        f"{r['ambiguous']:>5} {'PAUSED' if r['paused_by_credentials'] else 'ok'}"
        + ("" if r["configured"] else "  (not configured)")
        for r in rows
    ]
    lines += _held_lines(held)
    if state.switch:
        lines.append("switch in progress (run the same switch again to finish it): "
                     + str(state.switch.get("targets")))  # fmt: skip
    _print(args, view, lines)
    return 0


def _held_lines(held: list[ownership.Held]) -> list[str]:
    """Operations still owned by the provider their partition switched away from."""
    if not held:
        return []
    lines = [f"{len(held)} operation(s) still owned by the old provider (an unresolved ambiguous "
             "attempt: settled there, never sent elsewhere until proven unsent):"]  # fmt: skip
    lines += [f"  {h.operation_id}  partition {h.partition}  owner {h.owner}  "
              f"(partition now {h.current})" for h in held[:SHOWN]]  # fmt: skip
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
        client, settings.partitions, settings.partitions * 8, settings.max_attempts,
        clock.now_ms(),
    )  # fmt: skip
    age: dict[int, float] = {}
    for row in oldest:
        age.setdefault(int(row["partition"]), float(row["age_seconds"]))
    rows = []
    for name, partitions in by_name.items():
        ambiguous = [int(await client.zcard(PartitionKeys(p).ambiguous)) for p in partitions]
        rows.append({
            "provider": name,
            "configured": name in names,
            "partitions": partitions,
            "queue_age_seconds": max((age.get(p, 0.0) for p in partitions), default=0.0),
            "ambiguous": sum(ambiguous),
            "paused_by_credentials": name in state.auth_paused,
        })  # fmt: skip
    return rows


async def switch_to(client: RedisClient, settings: Any, args: argparse.Namespace) -> int:
    try:
        partitions = switch.parse_partitions(args.partitions, settings.partitions)
    except ValueError as error:
        print(str(error), file=sys.stderr)
        return 2
    return await _switch(client, {p: args.to for p in partitions}, settings, args.timeout)


async def rollback(client: RedisClient, settings: Any, args: argparse.Namespace) -> int:
    state = await control.read(client)
    targets = (
        switch.Plan.from_record(state.switch).targets if state.switch
        else await switch.previous(client)
    )  # fmt: skip
    if not targets:
        print("nothing to roll back: no switch since the last rollback (`resetgate ops "
              "provider show` lists the assignment)", file=sys.stderr)  # fmt: skip
        return 1
    done = await _switch(client, targets, settings, args.timeout)
    if done == 0:
        # A rollback is not a switch to undo: a second one would re-apply the first switch.
        await client.hdel(CONTROL, control.PREVIOUS)
    return done


async def _switch(
    client: RedisClient, targets: dict[int, str], settings: Any, wait_seconds: float
) -> int:
    names = configured(settings)
    try:
        plan = await switch.begin(client, targets, names)
        print(f"paused {_list(sorted(targets))}; waiting until nothing is in flight")
        busy = await switch.settle(client, plan, wait_seconds)
        if busy:
            print(f"still in flight after {wait_seconds:g}s: {busy}; the partitions stay paused: "
                  "run the same command again to continue", file=sys.stderr)  # fmt: skip
            return 1
        await switch.finish(client, plan, names)
    except switch.SwitchRefused as error:
        print(f"refused: {error}", file=sys.stderr)
        return 1
    moved = ", ".join(f"{p}->{n}" for p, n in sorted(targets.items()))
    print(f"switched and resumed: {moved}")
    return 0


def _list(partitions: list[int]) -> str:
    return ",".join(map(str, partitions)) or "-"


def register(
    cmds: argparse._SubParsersAction[argparse.ArgumentParser],
    run: Callable[[Handler], Callable[[argparse.Namespace], int]],
) -> None:
    provider = cmds.add_parser("provider", help="provider per partition: show, switch, rollback")
    pcmds = provider.add_subparsers(dest="provider_command", required=True)
    p = pcmds.add_parser("show", help="partitions, queue age and ambiguity per provider")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=run(show))
    p = pcmds.add_parser("switch", help="move partitions to another provider, never sending twice")
    p.add_argument("--partitions", required=True, help="e.g. 0-1 or 0,3,5-7")
    p.add_argument("--to", required=True, help="a name from RESETGATE_PROVIDERS")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for in-flight")
    p.set_defaults(handler=run(switch_to))
    p = pcmds.add_parser("rollback", help="go back to the assignment before the last switch")
    p.add_argument("--timeout", type=float, default=60.0)
    p.set_defaults(handler=run(rollback))

"""``resetgate ops provider switch --progressive`` and ``resetgate ops provider stop``.

The command hands the switch to its driver (shared/progressive_run.py: the sender holding
the lease) and follows it, printing each step line as it happens. While it follows, it is
a driver too: if no sender holds the lease (none running, or none of this version), it
takes it and drives the switch in the foreground. Interrupted, or with ``--detach``, it
leaves the switch to the senders: it goes on, and ``resetgate ops provider stop`` stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from shared import actions, control, progressive
from shared.clock import to_seconds
from shared.progressive import Limits, Phase, Plan
from shared.progressive_run import Driver
from shared.redis import RedisClient

FOLLOW_SECONDS = 1.0


def lines(plan: Plan | None) -> list[str]:
    """The progressive switch as ``ops provider show`` prints it (the last one, if ended)."""
    if plan is None:
        return []
    head = [plan.describe() + (f" (failover: {plan.reason})" if plan.policy else "")]
    if not plan.ended:
        head.append(
            f"  `{progressive.STOP_COMMAND}` stops it where it is; "
            f"`{progressive.ROLLBACK_COMMAND}` moves its partitions back"
        )
    return head + [f"  {line}" for line in plan.log[-10:]]


async def start(
    client: RedisClient,
    settings: Any,
    args: argparse.Namespace,
    partitions: list[int],
    configured: list[str],
) -> int:
    state = await control.read(client)
    try:
        if args.to not in configured:
            raise progressive.Refused(
                f"provider {args.to!r} is not configured "
                f"(RESETGATE_PROVIDERS: {', '.join(configured)})"
            )
        plan = progressive.plan_for(
            state,
            args.to,
            partitions,
            configured,
            Limits.of(settings),
            actions.cli_actor(),
            args.reason,
        )
    except progressive.Refused as error:
        print(f"refused: {error}", file=sys.stderr)
        return 1
    refused = await actions.progressive_switch(client, plan)
    if refused:
        print(f"refused: {refused}", file=sys.stderr)
        return 1
    print(
        f"progressive switch to {args.to} asked: partitions {plan.order[0]} first, then "
        f"{plan.limits.growth:g}x more each {to_seconds(plan.limits.window_ms):g} s window"
    )
    if args.detach:
        print(
            f"the senders drive it; `resetgate ops provider show` follows it, "
            f"`{progressive.STOP_COMMAND}` stops it"
        )
        return 0
    return await follow(client, configured, settings.partitions)


async def follow(client: RedisClient, configured: list[str], partitions: int) -> int:
    """Print each step line until the switch ends, driving it while no sender does."""
    driver = Driver(client, configured, partitions, f"{actions.cli_actor()}:{os.getpid()}")
    shown = 0
    try:
        while True:
            await driver.tick()
            plan = await progressive.read(client)
            if plan is None:
                return 1
            for line in plan.log[shown:] if shown <= len(plan.log) else plan.log:
                print(line, flush=True)
            shown = len(plan.log)
            if plan.ended:
                return 0 if plan.phase is Phase.DONE else 1
            await asyncio.sleep(FOLLOW_SECONDS)
    except asyncio.CancelledError:
        print(
            f"the switch goes on with the senders; `{progressive.STOP_COMMAND}` stops it",
            file=sys.stderr,
        )
        raise
    finally:
        await driver.release()


async def stop(
    client: RedisClient, settings: Any, args: argparse.Namespace, configured: list[str]
) -> int:
    plan = await actions.progressive_stop(client, actions.cli_actor(), args.rollback)
    if plan is None:
        print("no progressive switch is under way", file=sys.stderr)
        return 1
    print(f"asked to stop{' and roll back' if args.rollback else ''}: {plan.describe()}")
    await follow(client, configured, settings.partitions)
    return 0


def register_switch(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--progressive",
        action="store_true",
        help="one partition first, watched, then widened while the new "
        "provider holds; rolled back when it does not (docs/failover.md)",
    )
    parser.add_argument(
        "--detach",
        action="store_true",
        help="--progressive: leave it to the senders, do not follow it",
    )


def register_stop(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--rollback",
        action="store_true",
        help="and move the partitions it moved back where they were",
    )

"""Moving partitions to another provider without ever sending twice.

A switch is a small state machine persisted in the control record (``rg:control`` field
``switch``), so a command that dies half-way is finished by running it again:

1. ``pausing``: the switch is recorded and its partitions are paused; senders stop taking
   their jobs within a control refresh.
2. wait until nothing of those partitions is in flight (read and not acknowledged).
3. one transaction sets the new provider per partition, remembers the old assignment for
   ``rollback``, resumes the partitions this switch paused and clears the record.

It is refused only for a target that is not configured or is paused by credentials. An
operation holding an unresolved ambiguous attempt at the old provider does not hold the
switch up: it stays owned by that provider (shared.ownership), is settled there, and is
never sent through the new one until proven unsent; ``ops provider show`` lists them.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from shared import clock, codec, control
from shared.clock import to_seconds
from shared.keys import CONTROL
from shared.redis import RedisClient
from shared.status import in_flight

ROLLBACK_NOTHING = (
    "nothing to roll back: no switch since the last rollback (`resetgate ops "
    "provider show` lists the assignment)"
)

# Senders re-read the control record every second: after this long every one has seen the
# pause, so an empty pending list means nothing more will be read until the resume.
PAUSE_SEEN_MS = 2500


class SwitchRefused(Exception):
    """One line for on-call: why the switch cannot go ahead and what to do."""


@dataclass(frozen=True, slots=True)
class Plan:
    targets: dict[int, str]  # partition -> the provider it moves to
    before: dict[int, str]  # partition -> the provider it sends through now
    paused_before: list[int]  # already paused by someone else: stay paused afterwards
    started_at: int

    def record(self) -> dict[str, Any]:
        return {
            "targets": {str(p): n for p, n in self.targets.items()},
            "before": {str(p): n for p, n in self.before.items()},
            "paused_before": self.paused_before,
            "started_at": self.started_at,
        }

    @classmethod
    def from_record(cls, raw: dict[str, Any]) -> Plan:
        return cls(
            {int(p): str(n) for p, n in raw.get("targets", {}).items()},
            {int(p): str(n) for p, n in raw.get("before", {}).items()},
            [int(p) for p in raw.get("paused_before", [])],
            int(raw.get("started_at", 0)),
        )


def check_targets(
    targets: dict[int, str], configured: list[str], state: control.ControlState
) -> None:
    for name in sorted(set(targets.values())):
        if name not in configured:
            listed = ", ".join(configured)
            raise SwitchRefused(
                f"provider {name!r} is not configured (RESETGATE_PROVIDERS: {listed})"
            )
        if name in state.auth_paused:
            kind = control.pause_kind(state.auth_paused[name])
            cause = "its key" if kind == "credentials" else "the provider's refusal"
            raise SwitchRefused(
                f"provider {name!r} is paused by {kind}: fix {cause} and run "
                f"`resetgate ops provider-resume --provider {name}` first"
            )


async def begin(client: RedisClient, targets: dict[int, str], configured: list[str]) -> Plan:
    """Record the switch and pause its partitions; re-running the same switch resumes it."""
    state = await control.read(client)
    check_targets(targets, configured, state)
    if state.switch is not None:
        plan = Plan.from_record(state.switch)
        if plan.targets != targets:
            raise SwitchRefused(
                f"another switch is in progress: {describe(plan.targets)}; "
                "run it again to finish it first"
            )
    else:
        plan = Plan(
            targets,
            {p: state.provider_for(p, configured[0]) for p in targets},
            sorted(p for p in targets if p in state.paused),
            clock.now_ms(),
        )
        await client.hset(CONTROL, control.SWITCH, codec.dumps_str(plan.record()))
    # Again on a re-run: the command may have died between recording and pausing.
    moved = [p for p in targets if p not in plan.paused_before]
    if moved:
        await control.pause_partitions(client, moved, f"provider switch: {describe(targets)}")
    return plan


async def settle(client: RedisClient, plan: Plan, wait_seconds: float) -> dict[int, int]:
    """Wait until nothing of the plan's partitions is in flight; what is left ({} = done)."""
    deadline = time.monotonic() + wait_seconds
    while True:
        wait_ms = plan.started_at + PAUSE_SEEN_MS - clock.now_ms()
        busy = {p: await in_flight(client, p) for p in plan.targets}
        busy = {p: n for p, n in busy.items() if n}
        if wait_ms <= 0 and not busy:
            return {}
        if time.monotonic() > deadline:
            return busy or dict.fromkeys(plan.targets, 0)
        await asyncio.sleep(max(0.2, min(to_seconds(wait_ms), 0.5)))


async def finish(client: RedisClient, plan: Plan, configured: list[str]) -> None:
    """Assign, remember and resume at once; a target that lost its credentials meanwhile
    refuses (and undoes the pause)."""
    state = await control.read(client)
    try:
        check_targets(plan.targets, configured, state)
    except SwitchRefused:
        await abandon(client, plan)
        raise
    resume = [f"paused:{p}" for p in plan.targets if p not in plan.paused_before]
    previous = {str(p): n for p, n in plan.before.items()}
    async with client.pipeline(transaction=True) as pipe:
        pipe.hset(CONTROL, mapping={f"provider:{p}": n for p, n in plan.targets.items()})
        pipe.hset(CONTROL, control.PREVIOUS, codec.dumps_str(previous))
        pipe.hdel(CONTROL, control.SWITCH, *resume)
        await pipe.execute()


async def abandon(client: RedisClient, plan: Plan) -> None:
    """Give the partitions back to their provider as they were: resumed, record cleared."""
    resume = [f"paused:{p}" for p in plan.targets if p not in plan.paused_before]
    await client.hdel(CONTROL, control.SWITCH, *resume)


async def previous(client: RedisClient) -> dict[int, str]:
    raw = await client.hget(CONTROL, control.PREVIOUS)
    if not raw:
        return {}
    return {int(p): str(n) for p, n in codec.loads(raw).items()}


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a switch or a rollback ended, in one line for on-call (the CLI and the console)."""

    done: bool
    message: str


async def run(
    client: RedisClient, targets: dict[int, str], configured: list[str], wait_seconds: float
) -> Outcome:
    """Begin (or continue) a switch, wait for in-flight work, finish it: the whole switch."""
    try:
        plan = await begin(client, targets, configured)
        busy = await settle(client, plan, wait_seconds)
        if busy:
            wait = f"still in flight after {wait_seconds:g}s: {busy}"
            return Outcome(
                False, f"{wait}; the partitions stay paused: run the same switch again to finish it"
            )
        await finish(client, plan, configured)
    except SwitchRefused as error:
        return Outcome(False, f"refused: {error}")
    return Outcome(True, "switched and resumed: " + describe(targets))


async def rollback_targets(client: RedisClient) -> dict[int, str]:
    """What a rollback moves: a switch still in progress is finished first (another switch
    is refused meanwhile); else the last completed switch is undone."""
    state = await control.read(client)
    if state.switch:
        return Plan.from_record(state.switch).targets
    return await previous(client)


async def rollback(client: RedisClient, configured: list[str], wait_seconds: float) -> Outcome:
    targets = await rollback_targets(client)
    if not targets:
        return Outcome(False, ROLLBACK_NOTHING)
    outcome = await run(client, targets, configured, wait_seconds)
    if outcome.done:
        # A rollback is not a switch to undo: a second one would re-apply the first switch.
        await client.hdel(CONTROL, control.PREVIOUS)
    return outcome


def describe(targets: dict[int, str]) -> str:
    by_name: dict[str, list[int]] = {}
    for p, name in sorted(targets.items()):
        by_name.setdefault(name, []).append(p)
    return ", ".join(f"partitions {_ranges(ps)} -> {n}" for n, ps in by_name.items())


def _ranges(partitions: list[int]) -> str:
    return ",".join(str(p) for p in partitions)


def parse_partitions(text: str, partitions: int) -> list[int]:
    """``0-1``, ``0,2,5-7`` -> sorted partitions; ValueError names what is wrong."""
    chosen: set[int] = set()
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        try:
            first, last = int(low), int(high or low)
        except ValueError:
            raise ValueError(f"--partitions: {part!r} is not a partition or a range") from None
        if not 0 <= first <= last < partitions:
            raise ValueError(f"--partitions: {part!r} is outside 0-{partitions - 1}")
        chosen.update(range(first, last + 1))
    return sorted(chosen)

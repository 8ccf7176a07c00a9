"""The progressive provider switch: one partition first, watched, then 2, 4, ... while the
new provider holds, rolled back when it does not.

Every step is a manual switch (shared.switch: pause, wait for in-flight, assign at once),
so every rule of the manual switch holds at each step: an ambiguous attempt stays with the
provider that may have sent it, a replay decided at one provider is sent there, and each
operation's owner is known at every moment (shared.ownership).

Its state lives in Redis (``keys.PROGRESSIVE``: field ``plan`` the JSON record below,
field ``stop`` a person's request to stop), so any sender, the CLI or the console sees it
and can stop it, and one process drives it at a time: the one that holds
``keys.PROGRESSIVE_LEASE`` (shared/progressive_run.py). A driver that dies leaves the
record as it was; the next lease holder continues from the state it names.

States: ``moving`` (a step's switch, re-run until it completes) -> ``watching`` (the step's
window) -> ``moving`` the next step ... -> ``done``; ``rolling_back`` -> ``rolled_back``
when a step does not hold or a person asks; ``stopped`` when a person stops it where it is.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from typing import Any

from shared import clock, codec, control
from shared.keys import PROGRESSIVE, PROGRESSIVE_LEASE
from shared.redis import RedisClient
from shared.scripts.progressive import RecordSwitch
from shared.settings import ProgressiveSettings

PLAN, STOP = "plan", "stop"
LOG_KEPT = 40  # step lines kept in the record for the console and the CLI
STOP_COMMAND = "resetgate ops provider stop"
ROLLBACK_COMMAND = "resetgate ops provider stop --rollback"


class Phase(StrEnum):
    MOVING = "moving"
    WATCHING = "watching"
    ROLLING_BACK = "rolling_back"
    DONE = "done"
    STOPPED = "stopped"
    ROLLED_BACK = "rolled_back"


ENDED = frozenset({Phase.DONE, Phase.STOPPED, Phase.ROLLED_BACK})


@dataclass(frozen=True, slots=True)
class Limits:
    """How a switch widens and when it rolls back (shared.settings.ProgressiveSettings)."""

    first: int
    growth: float
    window_ms: int
    max_throttled_share: float
    abort_age_ms: int
    settle_ms: int

    @classmethod
    def of(cls, settings: ProgressiveSettings) -> Limits:
        return cls(
            settings.progressive_first,
            settings.progressive_growth,
            clock.to_ms(settings.progressive_window_seconds),
            settings.progressive_max_throttled_share,
            clock.to_ms(settings.progressive_abort_age_seconds),
            clock.to_ms(settings.progressive_settle_seconds),
        )


@dataclass(frozen=True, slots=True)
class Plan:
    to: str
    order: list[int]  # the partitions to move, in the order they move
    before: dict[int, str]  # partition -> the provider it sent through before the switch
    limits: Limits
    actor: str
    reason: str
    started_at: int
    policy: str = ""  # the failover policy's reason ("" when a person asked)
    phase: Phase = Phase.MOVING
    moved: list[int] = field(default_factory=list)  # assigned to ``to`` by a finished step
    batch: list[int] = field(default_factory=list)  # the step being moved now
    step: int = 0
    step_at: int = 0  # when the current step's window began (ms)
    ended_at: int = 0
    log: list[str] = field(default_factory=list)

    @property
    def ended(self) -> bool:
        return self.phase in ENDED

    @property
    def source(self) -> str:
        """The provider the switch moves away from (the first partition's)."""
        return self.before.get(self.order[0], "") if self.order else ""

    def next_batch(self) -> list[int]:
        """The partitions the next step moves: ``first``, then ``growth`` times the last."""
        size = self.limits.first
        for _ in range(self.step):
            size = max(size + 1, round(size * self.limits.growth))
        return [p for p in self.order if p not in self.moved][:size]

    def line(self, text: str) -> Plan:
        """The plan with one more step line (the newest last, the oldest dropped)."""
        stamp = time.strftime("%H:%M:%SZ", time.gmtime(clock.to_seconds(clock.now_ms())))
        return replace(self, log=[*self.log, f"{stamp} {text}"][-LOG_KEPT:])

    def record(self) -> dict[str, Any]:
        raw = asdict(self)
        raw["before"] = {str(p): n for p, n in self.before.items()}
        raw["phase"] = str(self.phase)
        return raw

    @classmethod
    def from_record(cls, raw: dict[str, Any]) -> Plan:
        limits = Limits(**raw["limits"])
        before = {int(p): str(n) for p, n in raw["before"].items()}
        rest = {k: v for k, v in raw.items() if k not in ("limits", "before", "phase")}
        return cls(**{**rest, "limits": limits, "before": before, "phase": Phase(raw["phase"])})

    def describe(self) -> str:
        total = len(self.order)
        where = f"{len(self.moved)} of {total} partitions at {self.to}"
        return f"progressive switch {self.source} -> {self.to}: {self.phase}, {where}"


class Refused(Exception):
    """Why a progressive switch cannot start, in one line for on-call."""


async def read(client: RedisClient) -> Plan | None:
    raw = await client.hget(PROGRESSIVE, PLAN)
    if not raw:
        return None
    try:
        return Plan.from_record(codec.loads(raw))
    except (codec.JSONDecodeError, KeyError, TypeError, ValueError):
        return None


async def running(client: RedisClient) -> Plan | None:
    """The progressive switch under way, if any (an ended one is only history)."""
    plan = await read(client)
    return plan if plan is not None and not plan.ended else None


async def save(client: RedisClient, plan: Plan) -> None:
    await client.hset(PROGRESSIVE, PLAN, codec.dumps_str(plan.record()))


def plan_for(
    state: control.ControlState,
    to: str,
    partitions: list[int],
    configured: list[str],
    limits: Limits,
    actor: str,
    reason: str,
    policy: str = "",
) -> Plan:
    """The switch of ``partitions`` (those not already at ``to``) to ``to``."""
    before = {p: state.provider_for(p, configured[0]) for p in partitions}
    order = [p for p in partitions if before[p] != to]
    if not order:
        raise Refused(f"every chosen partition already sends through {to}")
    return Plan(
        to, order, {p: before[p] for p in order}, limits, actor, reason, clock.now_ms(), policy
    )


async def request(client: RedisClient, plan: Plan) -> Plan:
    """Record ``plan`` for the driver, unless a switch (progressive or manual) is under way:
    one script decides, so two people asking at once start one switch."""
    if (await control.read(client)).switch is not None:
        raise Refused(
            "a switch is in progress: finish it first (run the same switch "
            "again, or the console's Finish the switch)"
        )
    record = codec.dumps_str(plan.line("requested").record())
    ended = "," + ",".join(sorted(ENDED)) + ","
    if not await RecordSwitch(plan=record, ended=ended).run(client):
        current = await running(client)
        what = current.describe() if current else "another switch"
        raise Refused(f"a progressive switch is under way ({what}); `{STOP_COMMAND}` stops it")
    return plan


@dataclass(frozen=True, slots=True)
class StopRequest:
    actor: str
    rollback: bool
    at: int


async def ask_stop(client: RedisClient, actor: str, rollback: bool) -> Plan | None:
    """Ask the driver to stop the switch under way (and roll its partitions back): the
    switch under way, or None when there is none."""
    plan = await running(client)
    if plan is not None:
        note = {"actor": actor, "rollback": rollback, "at": clock.now_ms()}
        await client.hset(PROGRESSIVE, STOP, codec.dumps_str(note))
    return plan


async def stop_request(client: RedisClient) -> StopRequest | None:
    raw = await client.hget(PROGRESSIVE, STOP)
    if not raw:
        return None
    try:
        note = codec.loads(raw)
        return StopRequest(str(note["actor"]), bool(note["rollback"]), int(note["at"]))
    except (codec.JSONDecodeError, KeyError, TypeError, ValueError):
        return StopRequest("?", True, 0)  # unreadable: the safe reading


async def clear_stop(client: RedisClient) -> None:
    await client.hdel(PROGRESSIVE, STOP)


async def driver(client: RedisClient) -> str:
    """Who drives the switch now ("" when nobody holds the lease)."""
    return str(await client.get(PROGRESSIVE_LEASE) or "")

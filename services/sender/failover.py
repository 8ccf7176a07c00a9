"""The preapproved failover: ``RESETGATE_FAILOVER_<NAME>=<standby>`` lets the senders start a
progressive switch (shared/progressive.py) from provider NAME to the standby by themselves.

Opt-in per provider; off, nothing moves by itself. The sender holding the progressive
switch's lease (shared/progressive_run.py) looks, every few seconds, for either reason:

- NAME is paused by a refusal of our side: its key (credentials), its account or domain
  (account), or the same refusal of several distinct operations (refusals). A quota pause
  lifts itself and never fails over; a refusal about one recipient pauses nothing.
- NAME has accepted nothing for a partition it serves for RESETGATE_FAILOVER_AFTER_SECONDS
  (default: a quarter of the delivery horizon) while that partition's oldest eligible
  operation is older than that: a short burst of 429s, or a partition that is merely
  quiet, does not qualify.

Then, once the standby passes its preflight checks (run then, read-only calls) and is not
paused, it asks for the progressive switch of every partition NAME serves (the one that
waited longest first), which pages (ProviderFailoverStarted) and which a person can stop at
any step. It never fails back by itself: when NAME is healthy again (not paused, its checks
pass), the switch's log says so, and the way back is the same progressive switch.
A failover that a person stopped, or that rolled back, is not started again for the
delivery horizon's length.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from shared import actions, clock, control, progressive
from shared.admit import horizon
from shared.clock import to_seconds
from shared.logging import event
from shared.loops import named_loop
from shared.preflight import Check, failing, store
from shared.progressive import Phase, Plan
from shared.progressive_run import Driver
from shared.progressive_watch import Departures, oldest_ages_ms
from shared.providers.named import ProviderConfigError
from shared.redis import RedisClient
from shared.service import Worker
from shared.settings import ENV_PREFIX, PolicySettings

log = logging.getLogger(__name__)
SERVICE = "sender"
VARIABLE = f"{ENV_PREFIX}FAILOVER_"  # + NAME upper-cased
TICK_SECONDS = 1.0
POLICY_EVERY = 2  # ticks between two looks at the providers
OUR_SIDE = frozenset(
    {control.PauseKind.CREDENTIALS, control.PauseKind.ACCOUNT, control.PauseKind.REFUSALS}
)

HEALTHY = "is healthy again"
Preflight = Callable[[str], Awaitable[list[Check]]]


def standbys(names: list[str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """provider -> its standby, from RESETGATE_FAILOVER_<NAME>; a standby that is not
    configured, or the provider itself, is a configuration error."""
    env = os.environ if environ is None else environ
    found = {}
    for name in names:
        variable = VARIABLE + name.upper()
        standby = env.get(variable, "").strip()
        if not standby:
            continue
        if standby not in names or standby == name:
            listed = ", ".join(n for n in names if n != name) or "none"
            raise ProviderConfigError(
                f"{variable}: {standby!r} is not another configured provider (configured: {listed})"
            )
        found[name] = standby
    return found


def after_ms(settings: PolicySettings, failover_after_seconds: float) -> int:
    """How long a partition waits with nothing accepted before it fails over."""
    if failover_after_seconds:
        return clock.to_ms(failover_after_seconds)
    return horizon(0, settings)[1] // 4


@dataclass(frozen=True, slots=True)
class Trigger:
    provider: str
    kind: str  # paused:<kind> | stalled: the page's reason label
    why: str
    first: int | None = None  # the partition that waited longest (stalled)


@dataclass(slots=True)
class Policy:
    client: RedisClient
    configured: list[str]
    partitions: int
    standbys: dict[str, str]
    after_ms: int
    limits: progressive.Limits
    preflight: Preflight
    holder: str
    departures: Departures = field(default_factory=Departures)
    last_accepted: dict[int, int] = field(default_factory=dict)  # partition -> ms

    async def look(self) -> Plan | None:
        """Start the failover a reason calls for; the plan asked for, or None."""
        state = await control.read(self.client)
        if state.switch is not None or await self._held_off():
            return None
        for provider, standby in self.standbys.items():
            trigger = await self._trigger(provider, state)
            if trigger is not None and await self._standby_ready(standby, state, trigger):
                return await self._start(trigger, standby, state)
        return None

    async def _trigger(self, provider: str, state: control.ControlState) -> Trigger | None:
        serves = [
            p
            for p in range(self.partitions)
            if state.provider_for(p, self.configured[0]) == provider
        ]
        if not serves:
            return None
        note = state.auth_paused.get(provider)
        kind = control.pause_kind(note) if note is not None else ""
        if kind in OUR_SIDE and note is not None:
            reason = str(note.get("reason") or "")
            return Trigger(provider, f"paused:{kind}", f"{provider} paused ({kind}): {reason}")
        return await self._stalled(provider, serves)

    async def _stalled(self, provider: str, serves: list[int]) -> Trigger | None:
        now = clock.now_ms()
        accepted = await self.departures.accepted(self.client, serves)
        for p in serves:
            if provider in accepted[p] or p not in self.last_accepted:
                self.last_accepted[p] = now
        ages = await oldest_ages_ms(self.client, self.partitions, now)
        late = [
            p
            for p in serves
            if now - self.last_accepted[p] >= self.after_ms and ages[p] >= self.after_ms
        ]
        if not late:
            return None
        first = max(late, key=lambda p: ages[p])
        return Trigger(
            provider,
            "stalled",
            f"{provider} accepted nothing for partition "
            f"{first} in {int(to_seconds(now - self.last_accepted[first]))} s while its "
            f"oldest eligible operation waited {int(to_seconds(ages[first]))} s",
            first,
        )

    async def _standby_ready(
        self, standby: str, state: control.ControlState, trigger: Trigger
    ) -> bool:
        note = state.auth_paused.get(standby)
        problem = f"{standby} is paused ({control.pause_kind(note)})" if note else ""
        if not problem:
            bad = failing(await self.preflight(standby))
            problem = "; ".join(f"{standby} fails its {c.check} check: {c.detail}" for c in bad)
        if problem:
            event(
                log,
                logging.WARNING,
                "failover held: the standby is not ready",
                provider=trigger.provider,
                standby=standby,
                problem=problem[:200],
            )
        return not problem

    async def _start(self, trigger: Trigger, standby: str, state: control.ControlState) -> Plan:
        serves = [
            p
            for p in range(self.partitions)
            if state.provider_for(p, self.configured[0]) == trigger.provider
        ]
        if trigger.first is not None:
            serves = [trigger.first, *(p for p in serves if p != trigger.first)]
        plan = progressive.plan_for(
            state,
            standby,
            serves,
            self.configured,
            self.limits,
            f"failover-policy:{self.holder}",
            trigger.why,
            trigger.kind,
        )
        refused = await actions.progressive_switch(self.client, plan)
        event(
            log,
            logging.WARNING,
            "failover started" if not refused else "failover refused",
            provider=trigger.provider,
            standby=standby,
            reason=trigger.why,
            refused=refused,
        )
        self.last_accepted.clear()
        return plan

    async def _held_off(self) -> bool:
        """A policy switch a person stopped, or that rolled back, is not started again
        within a delivery horizon: the person decides (a new switch lifts this)."""
        last = await progressive.read(self.client)
        if last is None or not last.policy or last.phase not in (Phase.STOPPED, Phase.ROLLED_BACK):
            return False
        return clock.now_ms() - last.ended_at < self.after_ms * 4


async def healthy_again(client: RedisClient, plan: Plan, checker: Checker) -> Plan | None:
    """After a failover, the provider it left, once it is not paused and its checks (the
    senders' periodic ones, or ``resetgate providers check``) pass since the switch began:
    the plan with a line saying so (once), else None."""
    source = plan.source
    if not plan.policy or any(HEALTHY in line for line in plan.log):
        return None
    paused = source in (await control.read(client)).auth_paused
    if paused or not await checker.passed_since(source, plan.started_at):
        return None
    return plan.line(
        f"{source} {HEALTHY} (not paused, its checks pass): "
        f"`resetgate ops provider switch --to {source} --progressive` moves "
        "the partitions back, one first"
    )


def worker(driver: Driver, policy: Policy | None, checker: Checker) -> Worker:
    """Every sender's loop: drive the progressive switch while holding its lease and, with
    a failover policy set, look for a reason to start one."""
    ticks = 0

    async def step() -> float:
        nonlocal ticks
        plan = await driver.tick()
        ticks += 1
        if not driver.holding or ticks % POLICY_EVERY:
            return TICK_SECONDS
        if plan is not None and plan.phase is Phase.DONE:
            told = await healthy_again(driver.client, plan, checker)
            if told is not None:
                await progressive.save(driver.client, told)
        elif policy is not None and (plan is None or plan.ended):
            await policy.look()
        return TICK_SECONDS

    return named_loop(SERVICE, "progressive_switch", step)


@dataclass(slots=True)
class Checker:
    """The preflight of one provider (shared/preflight, read-only calls), run at most once
    a minute per provider and stored for ``ops status`` and the console like the periodic
    one; and whether the latest stored one, run since ``since``, passes."""

    client: RedisClient
    run: Callable[[str], Awaitable[list[Check]]]
    every_ms: int = 60_000
    last: dict[str, tuple[int, list[Check]]] = field(default_factory=dict)

    async def __call__(self, provider: str) -> list[Check]:
        now = clock.now_ms()
        at, checks = self.last.get(provider, (0, []))
        if not at or now - at >= self.every_ms:
            checks = await self.run(provider)
            await store.save(self.client, provider, checks, now)
            self.last[provider] = (now, checks)
        return checks

    async def passed_since(self, provider: str, since: int) -> bool:
        found = (await store.read(self.client)).get(provider)
        return found is not None and found.checked_at > since and not found.failing

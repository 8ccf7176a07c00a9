"""The driver of a progressive switch (shared/progressive.py): one process at a time, the
one holding ``keys.PROGRESSIVE_LEASE``, advances the plan a tick at a time.

Every sender runs a driver (services/sender/failover.py), and so does ``resetgate ops
provider switch --progressive`` while it follows the switch: whoever holds the lease
drives, the others only watch, and a driver that dies is replaced within a lease. A tick
never waits long (a step's switch is re-run on the next tick until its in-flight sends
have settled), so the lease is renewed every tick.

Each step is shared.switch's manual switch; every step line goes to the plan's log (the
console and the CLI show it) and to the audit trail (action ``progressive-switch``).
"""

from __future__ import annotations

import logging
from dataclasses import replace

from shared import actions, clock, codec, control, metrics, progressive, switch
from shared.clock import to_seconds
from shared.keys import CONTROL, PROGRESSIVE_LEASE
from shared.logging import event
from shared.progressive import Phase, Plan
from shared.progressive_watch import StepWatch, eligible, oldest_ages_ms, throttled_total
from shared.redis import RedisClient
from shared.scripts.observation import Lease

log = logging.getLogger(__name__)
ACTION = "progressive-switch"
LEASE_MS = 15_000
SETTLE_TICK_SECONDS = 2.0  # how long one tick waits for a step's in-flight sends


class Driver:
    def __init__(
        self, client: RedisClient, configured: list[str], partitions: int, holder: str
    ) -> None:
        self.client = client
        self.configured = configured
        self.partitions = partitions
        self.holder = holder
        self.holding = False
        self._watch: StepWatch | None = None
        self._watching: tuple[int, int] = (0, -1)  # (the plan's started_at, its step)
        self._exported: tuple[str, str, str] | None = None

    async def lease(self) -> bool:
        self.holding = await Lease(
            holder=self.holder, lease_ms=LEASE_MS, key=PROGRESSIVE_LEASE
        ).run(self.client)
        return self.holding

    async def release(self) -> None:
        if self.holding:
            await Lease(holder=self.holder, release=True, key=PROGRESSIVE_LEASE).run(self.client)
        self.holding = False

    async def tick(self) -> Plan | None:
        """Advance the switch under way by one step of its state machine, when this driver
        holds the lease; the plan as it stands (None: there is none)."""
        if not await self.lease():
            self._watch = None
            self.export(None)
            return None
        plan = await progressive.read(self.client)
        self.export(plan)
        if plan is None or plan.ended:
            return plan
        advanced = await self._advance(plan)
        if advanced != plan:
            await progressive.save(self.client, advanced)
            self.export(advanced)
        return advanced

    async def _advance(self, plan: Plan) -> Plan:
        stop = await progressive.stop_request(self.client)
        if stop is not None:
            await progressive.clear_stop(self.client)
            return await self._stopped(plan, stop)
        if plan.phase is Phase.MOVING:
            return await self._move(plan)
        if plan.phase is Phase.WATCHING:
            return await self._watch_step(plan)
        return await self._roll_back(plan)

    # -- steps ---------------------------------------------------------------------------
    async def _move(self, plan: Plan) -> Plan:
        if not plan.batch:
            batch = plan.next_batch()
            plan = await self.note(
                replace(plan, batch=batch, step_at=clock.now_ms()),
                f"step {plan.step + 1}: moving partitions {_list(batch)} to {plan.to}",
                batch,
            )
        targets = dict.fromkeys(plan.batch, plan.to)
        try:
            started = await switch.begin(self.client, targets, self.configured)
            busy = await switch.settle(self.client, started, SETTLE_TICK_SECONDS)
            if not busy:
                await switch.finish(self.client, started, self.configured)
        except switch.SwitchRefused as error:
            return await self._abort(plan, f"step {plan.step + 1} refused: {error}")
        if busy:
            if clock.now_ms() - plan.step_at > plan.limits.settle_ms:
                return await self._abort(
                    plan,
                    f"step {plan.step + 1}: still in flight after "
                    f"{int(to_seconds(plan.limits.settle_ms))} s: {busy}",
                )
            return plan
        moved = [*plan.moved, *plan.batch]
        await self._remember_before(plan, moved)
        plan = replace(plan, moved=moved, batch=[], phase=Phase.WATCHING, step_at=clock.now_ms())
        return await self.note(
            plan,
            f"step {plan.step + 1}: partitions {_list(moved)} send "
            f"through {plan.to}; watching for "
            f"{to_seconds(plan.limits.window_ms):g} s",
        )

    async def _remember_before(self, plan: Plan, moved: list[int]) -> None:
        """``ops provider rollback`` undoes the whole progressive switch, not its last step."""
        before = {str(p): plan.before[p] for p in moved}
        await self.client.hset(CONTROL, control.PREVIOUS, codec.dumps_str(before))

    async def _watch_step(self, plan: Plan) -> Plan:
        watch = await self._step_watch(plan)
        note = (await control.read(self.client)).auth_paused.get(plan.to)
        if note is not None and control.pause_kind(note) != control.PauseKind.QUOTA:
            return await self._abort(
                plan,
                f"{plan.to} is paused ({control.pause_kind(note)}): {note.get('reason') or ''}",
            )
        await watch.sample(self.client, plan.moved)
        now = clock.now_ms()
        ages = await oldest_ages_ms(self.client, self.partitions, now)
        age = max((ages.get(p, 0) for p in plan.moved), default=0)
        limits = plan.limits
        if limits.abort_age_ms and age > limits.abort_age_ms:
            return await self._abort(
                plan,
                f"an operation of partitions {_list(plan.moved)} "
                f"waited {int(to_seconds(age))} s (over "
                f"{int(to_seconds(limits.abort_age_ms))} s)",
            )
        if now - watch.started_at < limits.window_ms:
            return plan
        return await self._judge(plan, watch, age)

    async def _judge(self, plan: Plan, watch: StepWatch, age_ms: int) -> Plan:
        throttled, accepted = await watch.throttled(self.client), watch.accepted
        figures = (
            f"accepted {accepted}, 429s {throttled}, oldest eligible {int(to_seconds(age_ms))} s"
        )
        window = plan.limits.window_ms
        if throttled > plan.limits.max_throttled_share * (accepted + throttled):
            return await self._abort(plan, f"step {plan.step + 1} does not hold: {figures}")
        waiting = await eligible(self.client, plan.moved, clock.now_ms())
        if accepted == 0 and watch.eligible_at_start and waiting:
            return await self._abort(
                plan,
                f"step {plan.step + 1}: {plan.to} accepted nothing "
                f"in {to_seconds(window):g} s while {waiting} waited ({figures})",
            )
        plan = await self.note(plan, f"step {plan.step + 1} holds: {figures}", plan.moved)
        if len(plan.moved) == len(plan.order):
            done = replace(plan, phase=Phase.DONE, ended_at=clock.now_ms())
            return await self.note(
                done, f"done: partitions {_list(plan.moved)} send through {plan.to}", plan.moved
            )
        return replace(plan, phase=Phase.MOVING, step=plan.step + 1)

    async def _step_watch(self, plan: Plan) -> StepWatch:
        """This step's window; a driver that takes over mid-window starts it again."""
        key = (plan.started_at, plan.step)
        if self._watch is None or self._watching != key:
            started = clock.now_ms()
            self._watch = StepWatch(
                plan.to,
                started,
                await throttled_total(self.client, plan.to),
                await eligible(self.client, plan.moved, started),
            )
            await self._watch.sample(self.client, plan.moved)  # the first look: a baseline
            self._watching = key
        return self._watch

    # -- ending ----------------------------------------------------------------------------
    async def _abort(self, plan: Plan, why: str) -> Plan:
        event(log, logging.WARNING, "progressive switch rolls back", to=plan.to, why=why)
        rolling = replace(plan, phase=Phase.ROLLING_BACK)
        return await self.note(rolling, f"rolling back: {why}", plan.moved + plan.batch)

    async def _stopped(self, plan: Plan, stop: progressive.StopRequest) -> Plan:
        who = f"stopped by {stop.actor}"
        if plan.phase is Phase.ROLLING_BACK:
            return await self.note(plan, f"{who}: the rollback under way continues")
        await self._drop_step(plan)
        if stop.rollback:
            return await self._abort(replace(plan, batch=[]), f"{who}")
        ended = replace(plan, phase=Phase.STOPPED, batch=[], ended_at=clock.now_ms())
        return await self.note(
            ended,
            f"{who}: partitions {_list(plan.moved)} stay at {plan.to}, the others where they were",
            plan.moved,
        )

    async def _drop_step(self, plan: Plan) -> None:
        """Give a step not yet finished back as it was (its partitions were never assigned)."""
        state = await control.read(self.client)
        if plan.batch and state.switch is not None:
            pending = switch.Plan.from_record(state.switch)
            if pending.targets == dict.fromkeys(plan.batch, plan.to):
                await switch.abandon(self.client, pending)

    async def _roll_back(self, plan: Plan) -> Plan:
        await self._drop_step(plan)
        plan = replace(plan, batch=[])
        targets = {p: plan.before[p] for p in plan.moved}
        if targets:
            try:
                started = await switch.begin(self.client, targets, self.configured)
                if await switch.settle(self.client, started, SETTLE_TICK_SECONDS):
                    return plan  # in flight at the new provider: the next tick finishes it
                await switch.finish(self.client, started, self.configured)
            except switch.SwitchRefused as error:
                ended = replace(plan, phase=Phase.STOPPED, ended_at=clock.now_ms())
                return await self.note(
                    ended,
                    f"cannot roll back ({error}): partitions {_list(plan.moved)} stay at {plan.to}",
                    plan.moved,
                )
            await self.client.hdel(CONTROL, control.PREVIOUS)
            await self._release_refused(plan)
        ended = replace(plan, phase=Phase.ROLLED_BACK, ended_at=clock.now_ms())
        return await self.note(
            ended,
            f"rolled back: partitions {_list(plan.moved)} send through {plan.source} again",
            plan.moved,
        )

    async def _release_refused(self, plan: Plan) -> None:
        """Operations the new provider refused and its refusals pause holds for review, of
        the partitions rolled back: refused is proven unsent, so their old provider sends
        them (the pause keeps the rest of its list for the person who lifts it)."""
        note = (await control.read(self.client)).auth_paused.get(plan.to)
        for operation_id in control.held_for_probe(note):
            if int(operation_id.split("-", 2)[1]) in plan.moved:
                await actions.release(self.client, operation_id, plan.actor)

    # -- record ----------------------------------------------------------------------------
    async def note(self, plan: Plan, text: str, partitions: list[int] | None = None) -> Plan:
        """One step line: in the plan's log, the audit trail and the log."""
        await actions.record(
            self.client,
            plan.actor,
            ACTION,
            f"provider:{plan.to}",
            str(plan.phase),
            actions.clean_reason(text),
            partitions=sorted(partitions or []),
            providers=sorted({plan.source, plan.to}),
        )
        return plan.line(text)

    def export(self, plan: Plan | None) -> None:
        """The failover page's gauge (ProviderFailoverStarted): the partitions the policy
        moved, exported by the driver only (another sender's series would outlive it)."""
        labels = None
        if self.holding and plan is not None and plan.policy:
            labels = (plan.source, plan.to, plan.policy)
        if self._exported is not None and self._exported != labels:
            metrics.failover_partitions.remove(*self._exported)
        self._exported = labels
        if labels is not None and plan is not None:
            moved = 0 if plan.phase is Phase.ROLLED_BACK else len(plan.moved)
            metrics.failover_partitions.labels(*labels).set(moved)


def _list(partitions: list[int]) -> str:
    return ",".join(map(str, partitions)) or "-"

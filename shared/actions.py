"""On-call's actions, each recorded with who took it: the CLI and the console call these,
and only these, so an action does the same whichever of the two took it.

An actor is a short name (``cli:alice``, ``console:alice``); what an operator types as a
reason is scrubbed of addresses, URLs and tokens before it is stored, since it is shown
again on every view of the operation. Every action, done or refused, is appended once to the
audit stream (capped by count and by age, ``audit_retention_days``) and logged. The stream
is written only here: the console's own listener and the CLI, never the public port.
"""

from __future__ import annotations

import getpass
import logging
from dataclasses import dataclass
from typing import Any

from shared import clock, control, progressive, switch
from shared.control import pause_partitions, resume_partitions
from shared.keys import AUDIT
from shared.logging import cut, event, printable, scrub
from shared.redis import RedisClient
from shared.scripts.attempts import Quarantine, QuarantineCode

log = logging.getLogger(__name__)

AUDIT_MAXLEN = 10_000
MAX_REASON = 200


@dataclass(frozen=True, slots=True)
class ActionResult:
    done: bool
    state: str  # the state before the action, or the state that refused it ("missing")


def cli_actor() -> str:
    """Who ran a ``resetgate ops`` command: the login of the shell, not a player."""
    try:
        return "cli:" + getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (a container's arbitrary uid)
        return "cli"


def clean_reason(reason: str) -> str:
    """What an operator typed, safe to store and show: bounded before any pattern runs, no
    terminal or bidi control characters (they would rewrite the line on a terminal, or
    reorder it in the console), no address, URL or token."""
    return " ".join(scrub(printable(cut(reason, 4 * MAX_REASON))).split())[:MAX_REASON]


async def record(
    client: RedisClient,
    actor: str,
    action: str,
    target: str,
    result: str,
    reason: str = "",
    *,
    partitions: list[int] | None = None,
    providers: list[str] | None = None,
) -> None:
    """One action. ``partitions`` and ``providers``: what else it touched (a switch's target
    is the provider it moves to; it also moves these partitions away from those providers),
    so the trail filtered by either finds it."""
    fields = {
        "at": str(clock.now_ms()),
        "actor": actor,
        "action": action,
        "target": target,
        "result": result,
        "reason": reason,
        "partitions": ",".join(map(str, partitions or [])),
        "providers": ",".join(providers or []),
    }
    await client.xadd(AUDIT, fields, maxlen=AUDIT_MAXLEN, approximate=True)  # type: ignore[arg-type]
    event(log, logging.INFO, "operator action", **fields)


async def trim(client: RedisClient, retention_days: float) -> int:
    """Forget actions older than ``retention_days`` (the count cap applies as well)."""
    oldest = clock.now_ms() - int(retention_days * 86_400_000)
    return int(await client.xtrim(AUDIT, minid=max(oldest, 0)))


async def recent(client: RedisClient, count: int = 20) -> list[dict[str, Any]]:
    """The last ``count`` recorded actions, newest first."""
    entries: Any = await client.xrevrange(AUDIT, count=count)
    return [dict(fields) for _, fields in entries]


@dataclass(frozen=True, slots=True)
class TrailFilter:
    """Which actions to show: those that touched an operation, a partition or a provider."""

    operation: str = ""
    partition: int | None = None
    provider: str = ""

    def matches(self, entry: dict[str, Any]) -> bool:
        target = str(entry.get("target") or "")
        if self.operation and target != self.operation:
            return False
        if self.partition is not None and not (
            target == f"partition:{self.partition}"
            or str(self.partition) in _listed(entry, "partitions")
        ):
            return False
        return not self.provider or (
            target == f"provider:{self.provider}" or self.provider in _listed(entry, "providers")
        )


def _listed(entry: dict[str, Any], name: str) -> list[str]:
    return [v for v in str(entry.get(name) or "").split(",") if v]


async def trail(
    client: RedisClient,
    chosen: TrailFilter,
    *,
    limit: int = 50,
    before: str = "+",
    scan: int = AUDIT_MAXLEN,
) -> tuple[list[dict[str, Any]], str]:
    """Up to ``limit`` matching actions, newest first, from ``before`` (a stream id, "+" for
    the newest) back; and the id to continue from ("" when the trail ends)."""
    found: list[dict[str, Any]] = []
    while scan > 0:
        entries: Any = await client.xrevrange(AUDIT, max=before, count=min(scan, 500) + 1)
        if before != "+" and entries and entries[0][0] == before:
            entries = entries[1:]
        if not entries:
            return found, ""
        for entry_id, fields in entries:
            if chosen.matches(fields):
                found.append({**fields, "id": entry_id})
                if len(found) == limit:
                    return found, entry_id
        scan -= len(entries)
        before = entries[-1][0]
    return found, ""


async def _quarantined(
    client: RedisClient,
    operation_id: str,
    action: str,
    actor: str,
    note: str,
    reason: str,
    retention_ms: int = 0,
) -> ActionResult:
    request = Quarantine(
        operation_id=operation_id,
        action=action,
        now=clock.now_ms(),
        reason=note,
        retention_ms=retention_ms,
    )
    code, state = await request.run(client)
    done = code is QuarantineCode.OK
    await record(
        client, actor, action, operation_id, "done" if done else f"refused:{state}", reason
    )
    return ActionResult(done, state)


async def quarantine(
    client: RedisClient, operation_id: str, actor: str, reason: str
) -> ActionResult:
    """Hold a live operation: it keeps its id and token and is not sent until released."""
    reason = clean_reason(reason)
    note = f"quarantined by {actor}: {reason}"
    return await _quarantined(client, operation_id, "quarantine", actor, note, reason)


async def release(client: RedisClient, operation_id: str, actor: str) -> ActionResult:
    """Return a quarantined operation, or one held for review, to the send queue."""
    return await _quarantined(client, operation_id, "release", actor, f"released by {actor}", "")


async def close(
    client: RedisClient, operation_id: str, actor: str, reason: str, retention_ms: int
) -> ActionResult:
    """End an operation held for review without sending it (model.CLOSED_AS); it is kept
    ``retention_ms`` like any finished operation."""
    reason = clean_reason(reason)
    note = f"closed by {actor}: {reason}"
    return await _quarantined(client, operation_id, "close", actor, note, reason, retention_ms)


async def pause(client: RedisClient, partitions: list[int], actor: str, reason: str) -> None:
    reason = clean_reason(reason)
    await pause_partitions(client, partitions, f"{actor}: {reason}")
    for partition in partitions:
        await record(client, actor, "pause", f"partition:{partition}", "done", reason)


async def resume(client: RedisClient, partitions: list[int], actor: str) -> None:
    await resume_partitions(client, partitions)
    for partition in partitions:
        await record(client, actor, "resume", f"partition:{partition}", "done")


@dataclass(frozen=True, slots=True)
class Resumed:
    """A provider resume: the kind of pause lifted ("" if none was on) and, after a refusals
    pause, the operation sent again as the probe and how many stay held for review."""

    kind: str
    probe: str = ""
    still_held: int = 0


async def provider_resume(client: RedisClient, provider: str, actor: str) -> Resumed:
    """Lift the provider pause, whatever its kind; after a refusals pause one operation that
    tripped the guard goes back to the queue as the probe, the others stay held for review
    (a person releases them once the probe is accepted, so a resume cannot re-trip it)."""
    note = (await control.read(client)).auth_paused.get(provider)
    lifted = await control.auth_resume(client, provider)
    kind = control.pause_kind(note) if lifted and note is not None else ""
    result = f"done:{kind}" if kind else "refused:not paused"
    await record(
        client,
        actor,
        "provider-resume",
        f"provider:{provider}",
        result,
        str((note or {}).get("reason") or ""),
    )
    if not kind:
        return Resumed("")
    held = control.held_for_probe(note)
    for at, operation_id in enumerate(held):
        if (await release(client, operation_id, actor)).done:
            return Resumed(kind, operation_id, len(held) - at - 1)
    return Resumed(kind)


async def provider_switch(
    client: RedisClient,
    targets: dict[int, str],
    configured: list[str],
    wait_seconds: float,
    actor: str,
    reason: str = "",
) -> switch.Outcome:
    """Move ``targets``' partitions (shared.switch), recorded with the providers they leave."""
    before = await _assignment(client, targets, configured)
    outcome = await _unless_progressive(client) or await switch.run(
        client, targets, configured, wait_seconds
    )
    await _record_switch(client, "provider-switch", actor, targets, before, outcome, reason)
    return outcome


async def provider_rollback(
    client: RedisClient, configured: list[str], wait_seconds: float, actor: str, reason: str = ""
) -> switch.Outcome:
    targets = await switch.rollback_targets(client)
    before = await _assignment(client, targets, configured)
    outcome = await _unless_progressive(client) or await switch.rollback(
        client, configured, wait_seconds
    )
    await _record_switch(client, "provider-rollback", actor, targets, before, outcome, reason)
    return outcome


async def _unless_progressive(client: RedisClient) -> switch.Outcome | None:
    """A manual switch or rollback waits for the progressive switch under way: its driver
    owns the partitions it moves until it ends (``stop --rollback`` undoes it)."""
    plan = await progressive.running(client)
    if plan is None:
        return None
    return switch.Outcome(
        False,
        f"refused: {plan.describe()}; `{progressive.STOP_COMMAND}` "
        f"stops it, `{progressive.ROLLBACK_COMMAND}` undoes it",
    )


async def progressive_switch(client: RedisClient, plan: progressive.Plan) -> str:
    """Hand ``plan`` to the driver (shared.progressive_run); "" or why it was refused."""
    refused = ""
    try:
        await progressive.request(client, plan)
    except progressive.Refused as error:
        refused = str(error)
    await record(
        client,
        plan.actor,
        "progressive-switch",
        f"provider:{plan.to}",
        f"refused: {refused}"[:MAX_REASON] if refused else "requested",
        clean_reason(plan.reason),
        partitions=plan.order,
        providers=sorted({plan.source, plan.to}),
    )
    return refused


async def progressive_stop(
    client: RedisClient, actor: str, rollback: bool
) -> progressive.Plan | None:
    """Ask the driver to stop the progressive switch under way (and roll it back); the
    switch it stops, or None when none is under way."""
    plan = await progressive.ask_stop(client, actor, rollback)
    what = "stop and roll back" if rollback else "stop"
    await record(
        client,
        actor,
        "progressive-stop",
        f"provider:{plan.to}" if plan else "-",
        f"asked: {what}" if plan else "refused: none under way",
        partitions=plan.moved if plan else None,
    )
    return plan


async def _assignment(
    client: RedisClient, targets: dict[int, str], configured: list[str]
) -> dict[int, str]:
    state = await control.read(client)
    return {p: state.provider_for(p, configured[0]) for p in targets}


async def _record_switch(
    client: RedisClient,
    action: str,
    actor: str,
    targets: dict[int, str],
    before: dict[int, str],
    outcome: switch.Outcome,
    reason: str,
) -> None:
    to = sorted(set(targets.values()))
    involved = sorted(set(to) | set(before.values()))
    moved = ", ".join(f"{p}:{before.get(p, '?')}->{n}" for p, n in sorted(targets.items()))
    result = "done" if outcome.done else outcome.message
    await record(
        client,
        actor,
        action,
        "provider:" + ",".join(to) if to else "-",
        result[:MAX_REASON],
        clean_reason(f"{reason} ({moved})" if reason else moved),
        partitions=sorted(targets),
        providers=involved,
    )

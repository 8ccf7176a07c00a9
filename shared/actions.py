"""On-call's actions, each recorded with who took it: the CLI and the console call these.

An actor is a short name (``cli:alice``, ``console:alice``); what an operator types as a
reason is scrubbed of addresses, URLs and tokens before it is stored, since it is shown
again on every view of the operation. Every action, done or refused, is appended to the
audit stream (capped) and logged.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from shared import clock
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


def clean_reason(reason: str) -> str:
    """What an operator typed, safe to store and show: bounded before any pattern runs, no
    terminal or bidi control characters (they would rewrite the line on a terminal, or
    reorder it in the console), no address, URL or token."""
    return " ".join(scrub(printable(cut(reason, 4 * MAX_REASON))).split())[:MAX_REASON]


async def record(
    client: RedisClient, actor: str, action: str, target: str, result: str, reason: str = ""
) -> None:
    fields = {
        "at": str(clock.now_ms()), "actor": actor, "action": action, "target": target,
        "result": result, "reason": reason,
    }  # fmt: skip
    await client.xadd(AUDIT, fields, maxlen=AUDIT_MAXLEN, approximate=True)  # type: ignore[arg-type]
    event(log, logging.INFO, "operator action", **fields)


async def recent(client: RedisClient, count: int = 20) -> list[dict[str, Any]]:
    """The last ``count`` recorded actions, newest first."""
    entries: Any = await client.xrevrange(AUDIT, count=count)
    return [dict(fields) for _, fields in entries]


async def _quarantined(
    client: RedisClient, operation_id: str, action: str, actor: str, note: str, reason: str
) -> ActionResult:
    request = Quarantine(operation_id=operation_id, action=action, now=clock.now_ms(), reason=note)
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


async def pause(client: RedisClient, partitions: list[int], actor: str, reason: str) -> None:
    reason = clean_reason(reason)
    await pause_partitions(client, partitions, f"{actor}: {reason}")
    for partition in partitions:
        await record(client, actor, "pause", f"partition:{partition}", "done", reason)


async def resume(client: RedisClient, partitions: list[int], actor: str) -> None:
    await resume_partitions(client, partitions)
    for partition in partitions:
        await record(client, actor, "resume", f"partition:{partition}", "done")

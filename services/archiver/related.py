"""What else names a batch's operations: the operator actions (the audit stream, whose
``target`` is an operation id) and the support cases (``operation_id``). Both streams are
capped and have no index, so each is read once per batch, from the batch's oldest operation
on, a bounded number of pages."""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import aclosing
from typing import Any

from shared.keys import AUDIT
from shared.operation_views import CLOCK_SKEW_MS, scan_cases
from shared.redis import RedisClient

AUDIT_PAGE = 500
AUDIT_PAGES = 20  # the audit stream holds about 10,000 actions (shared/actions.py)


async def operator_actions(
    client: RedisClient, operation_ids: Iterable[str], since_ms: int
) -> dict[str, list[tuple[str, dict[str, str]]]]:
    """operation id -> [(entry id, fields)] of the actions on it, oldest first."""
    wanted = set(operation_ids)
    found: dict[str, list[tuple[str, dict[str, str]]]] = {}
    start = f"{max(0, since_ms - CLOCK_SKEW_MS)}-0"
    for _ in range(AUDIT_PAGES):
        entries: Any = await client.xrange(AUDIT, start, "+", count=AUDIT_PAGE)
        for entry_id, fields in entries:
            target = (fields or {}).get("target", "")
            if target in wanted:
                found.setdefault(target, []).append((str(entry_id), dict(fields)))
        if len(entries) < AUDIT_PAGE:
            break
        start = "(" + str(entries[-1][0])
    return found


async def support_cases(
    client: RedisClient, operation_ids: Iterable[str], since_ms: int
) -> dict[str, list[tuple[str, dict[str, str]]]]:
    """operation id -> [(entry id, fields)] of the support cases about it, oldest first."""
    wanted = set(operation_ids)
    found: dict[str, list[tuple[str, dict[str, str]]]] = {}
    async with aclosing(scan_cases(client, since_ms)) as entries:
        async for entry_id, fields in entries:
            operation_id = fields.get("operation_id", "")
            if operation_id in wanted:
                found.setdefault(operation_id, []).append((entry_id, fields))
    return found

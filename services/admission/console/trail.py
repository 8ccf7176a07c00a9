"""Who did what: the operator actions (CLI and console alike, ``shared.actions``), newest
first, filtered by operation, partition or provider, paged. Read-only: the trail is written
only by the actions themselves."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from services.admission.console.context import REDIS, SETTINGS
from services.admission.console.html import Markup, escape, join, link, render, row, table, when
from services.admission.console.pages import message, notice, operation_href, page
from services.admission.console.provider_lines import configured_kinds
from shared import actions
from shared.ids import valid_operation_id

PAGE = 50
COLUMNS = ("When", "Who", "Action", "Target", "Result", "Reason", "Partitions", "Providers")
FIELDS = ("actor", "action", "target", "result", "reason", "partitions", "providers")
_STREAM_ID = r"^\d{1,15}-\d{1,6}$"


def _cells(entry: dict[str, Any]) -> list[object]:
    """The entry's fields; an operation it acted on is a link to that operation."""
    cells: list[object] = [entry.get(f) or "-" for f in FIELDS]
    target = str(entry.get("target") or "")
    if valid_operation_id(target):
        cells[FIELDS.index("target")] = link(operation_href(target), target)
    return cells


def entries_table(entries: list[dict[str, Any]]) -> Markup:
    if not entries:
        return notice("No operator action recorded.")
    rows = [row(when(int(e.get("at") or 0)), *_cells(e)) for e in entries]
    return table(COLUMNS, rows)


def _filter(request: web.Request) -> actions.TrailFilter | None:
    """The filter from the query; None when a value is not one the trail could hold."""
    query = request.query
    operation = query.get("operation", "").strip()
    partition = query.get("partition", "").strip()
    provider = query.get("provider", "").strip()
    if operation and not valid_operation_id(operation):
        return None
    if partition and not (partition.isascii() and partition.isdigit() and len(partition) < 6):
        return None
    known = configured_kinds(request.app[SETTINGS].provider_name)
    if provider and provider not in known:
        return None
    return actions.TrailFilter(operation, int(partition) if partition else None, provider)


def _options(request: web.Request, chosen: str) -> Markup:
    names = ["", *configured_kinds(request.app[SETTINGS].provider_name)]
    return join(
        Markup(
            f'<option value="{escape(n)}"{" selected" if n == chosen else ""}>'
            f"{escape(n or 'any')}</option>"
        )
        for n in names
    )


async def trail_page(request: web.Request) -> web.Response:
    chosen = _filter(request)
    before = request.query.get("before", "+")
    if chosen is None or (before != "+" and not re.match(_STREAM_ID, before)):
        why = "Filter by an operation id (op-…), a partition number or a configured provider."
        return message(request, 422, "Operator actions", why, "/console/audit")
    entries, more = await actions.trail(request.app[REDIS], chosen, limit=PAGE, before=before)
    query = {
        "operation": chosen.operation,
        "provider": chosen.provider,
        "partition": "" if chosen.partition is None else str(chosen.partition),
    }
    pager = Markup("")
    if more:
        pager = link("/console/audit?" + urlencode({**query, "before": more}), "Older actions")
    body = render(
        "trail",
        operation=chosen.operation,
        partition=query["partition"],
        providers=_options(request, chosen.provider),
        entries=entries_table(entries),
        pager=pager,
    )
    return page(request, "Operator actions", body)


async def for_operation(request: web.Request, operation_id: str) -> Markup:
    """The actions that touched one operation, for its page."""
    entries, _ = await actions.trail(
        request.app[REDIS], actions.TrailFilter(operation=operation_id), limit=PAGE
    )
    return entries_table(entries)

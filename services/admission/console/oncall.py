"""On-call pages: the oldest eligible operations (refreshed live) and the providers and
partitions. One row per operation or per partition, never an average."""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web

from services.admission.console import html
from services.admission.console.charts import horizon_share, percent
from services.admission.console.checks import failing_checks
from services.admission.console.context import REDIS, SETTINGS
from services.admission.console.pages import notice, operation_href, page
from services.admission.console.provider_lines import lines_table, snapshot
from services.admission.console.trail import entries_table
from services.admission.console.views import provider_text
from shared import actions, clock, control, operation_views
from shared.model import State
from shared.status import Pacing

OLDEST_LIMIT = 20
AUDIT_SHOWN = 20  # the newest operator actions on the providers page; the trail has them all
# The columns of operation_cells, after those that name the operation.
OPERATION_COLUMNS = ("State", "Age", "Of horizon", "Attempts left", "Last status", "Next attempt")
PARTITION_COLUMNS = ("Partition", "Paused", "Oldest operation", *OPERATION_COLUMNS)
OVERALL_COLUMNS = ("Operation", "Partition", *OPERATION_COLUMNS)
PARTITIONS_CAPTION = (
    "Each partition's oldest eligible operation (live, not quarantined or held for review) "
    "and its age against its delivery horizon: the share of the time from creation to "
    "horizon already spent."
)


def _share_of_horizon(r: dict[str, Any]) -> str:
    """How much of the time from creation to the delivery horizon is already spent."""
    return percent(horizon_share(r))


def operation_cells(r: dict[str, Any], now: int) -> list[object]:
    return [
        r["state"],
        html.seconds(r["age_seconds"]),
        _share_of_horizon(r),
        r["remaining_attempts"],
        r["last_status"] or "-",
        html.relative(r["next_attempt_at"], now),
    ]


async def _oldest_live(request: web.Request, now: int) -> list[dict[str, Any]]:
    settings = request.app[SETTINGS]
    return await operation_views.oldest_live(
        request.app[REDIS], settings.partitions, OLDEST_LIMIT * 4, settings.max_attempts, now
    )


def _partition_row(partition: int, paused: bool, r: dict[str, Any] | None, now: int) -> html.Markup:
    pause = "paused" if paused else "no"
    if r is None:
        return html.row(partition, pause, "none", *["-"] * len(OPERATION_COLUMNS))
    op = html.link(operation_href(r["operation_id"]), r["operation_id"])
    return html.row(partition, pause, op, *operation_cells(r, now))


async def _live_fragment(request: web.Request) -> html.Markup:
    settings = request.app[SETTINGS]
    client = request.app[REDIS]
    now = clock.now_ms()
    state = await control.read(client)
    per_partition = await operation_views.oldest_per_partition(
        client, settings.partitions, settings.max_attempts, now
    )
    partition_rows = [
        _partition_row(p, p in state.paused, r, now) for p, r in enumerate(per_partition)
    ]
    live = await _oldest_live(request, now)
    overall_rows = [
        html.row(
            html.link(operation_href(r["operation_id"]), r["operation_id"]),
            r["partition"],
            *operation_cells(r, now),
        )
        for r in [r for r in live if r["state"] not in operation_views.HELD][:OLDEST_LIMIT]
    ]
    if not overall_rows:
        empty = f'<tr><td colspan="{len(OVERALL_COLUMNS)}">No eligible operation.</td></tr>'
        overall_rows = [html.Markup(empty)]
    overall_caption = (
        f"The {OLDEST_LIMIT} oldest eligible operations across every partition, one row each. "
        "Quarantined operations and those held for review are listed below."
    )
    held = await operation_views.held_for_review(client, settings.partitions)
    return html.join(
        [
            html.section(
                "partitions",
                "Per partition",
                html.scrolled(
                    "partitions", html.table(PARTITION_COLUMNS, partition_rows, PARTITIONS_CAPTION)
                ),
            ),
            html.section(
                "overall",
                "Overall, oldest first",
                html.scrolled(
                    "overall", html.table(OVERALL_COLUMNS, overall_rows, overall_caption)
                ),
            ),
            html.section("review", "Held for review", _review(held)),
            html.section(
                "quarantined",
                "Quarantined",
                _quarantined([r for r in live if r["state"] == State.QUARANTINED], now),
            ),
        ]
    )


def _quarantined(rows: list[dict[str, Any]], now: int) -> html.Markup:
    """Held by an operator: not eligible, so not in the lists above, but findable here."""
    if not rows:
        return notice("No operation is quarantined.")
    items = [
        html.Markup(
            f"<li>{html.link(operation_href(r['operation_id']), r['operation_id'])} "
            f"(partition {html.escape(r['partition'])}, "
            f"created {html.relative(r['created_at'], now)})</li>"
        )
        for r in rows[:OLDEST_LIMIT]
    ]
    return html.Markup(f"<ul>{html.join(items)}</ul>")


def _review(rows: list[dict[str, Any]]) -> html.Markup:
    if not rows:
        return notice("Nothing is held for review.")
    items = [
        html.Markup(
            f"<li>{html.link(operation_href(r['operation_id']), r['operation_id'])} "
            f"(partition {html.escape(r['partition'])}, since {html.when(r['since'])})</li>"
        )
        for r in rows[:OLDEST_LIMIT]
    ]
    return html.Markup(f"<ul>{html.join(items)}</ul>")


async def oldest(request: web.Request) -> web.Response:
    now = time.strftime("%H:%M:%S UTC", time.gmtime())
    body = html.render("oldest", live=await _live_fragment(request), now=now)
    return page(request, "Oldest eligible operations", body)


async def oldest_live(request: web.Request) -> web.Response:
    """The refreshed part of the oldest page, for console.js."""
    return web.Response(
        text=await _live_fragment(request), content_type="text/html", charset="utf-8"
    )


# -- providers and partitions --------------------------------------------------------------
PROVIDER_PARTITION_COLUMNS = (
    "Partition",
    "Provider",
    "Sending",
    "Paused by / why",
    "Send queue",
    "In flight",
    "Due later",
    "Ambiguous",
    "Review",
    "Live",
    "Action",
)
PROVIDER_PARTITIONS_CAPTION = (
    "Draining: paused, with attempts still finishing. "
    "In flight: read by a sender, not yet finished."
)


def _pacing(name: str, pacing: Pacing, now: int) -> html.Markup:
    """What the provider is really accepting, when the next send may go, and a quota pause."""
    measured = pacing.accepting is not None
    accepting = f"{pacing.accepting:.2f} sends/s" if measured else "not measured yet"
    settled = f"{pacing.settled:.2f} sends/s" if pacing.settled else "-"
    text = (
        f"Accepting now: {accepting}; settled at {settled}; "
        f"next slot {html.relative(pacing.next_slot_at, now)}."
    )
    if pacing.paused_until:
        text += f" <strong>Paused until {html.when(pacing.paused_until)} (daily quota)</strong>."
    return html.Markup(f"<p><strong>{html.escape(name)}</strong>. {text}</p>")


def _pause_action(partition: int, paused: bool, can_act: bool) -> html.Markup:
    if not can_act:
        return html.Markup("-")
    verb = "resume" if paused else "pause"
    return html.link(f"/console/partitions/{partition}/{verb}", f"{verb.capitalize()}…")


def _sending(r: dict[str, Any]) -> str:
    if r["draining"]:
        return f"paused, draining ({r['in_flight']} in flight)"
    return "paused" if r["paused"] else "yes"


def _paused_by(r: dict[str, Any]) -> html.Markup:
    if not r["paused"]:
        return html.Markup("-")
    return html.Markup(
        f"{html.escape(r['paused_reason'] or 'no reason given')}, "
        f"since {html.when(r['paused_since'])}"
    )


async def providers(request: web.Request) -> web.Response:
    view = await snapshot(request)
    client, can_act, now = view.client, view.can_act, view.now
    state, rows, lines = view.state, view.partitions, view.lines
    configured = [line.name for line in lines]
    partition_rows = [
        html.row(
            r["partition"],
            provider_text(state.provider_for(r["partition"], configured[0]), configured),
            _sending(r),
            _paused_by(r),
            r["send"],
            r["in_flight"],
            r["due"],
            r["ambiguous"],
            r["review"],
            r["live"],
            _pause_action(r["partition"], r["paused"], can_act),
        )
        for r in rows
    ]
    recent, _ = await actions.trail(client, actions.TrailFilter(), limit=AUDIT_SHOWN)
    checked = {line.name: line.checks for line in lines if line.checks}
    pacing = [*(_pacing(line.name, line.pacing, now) for line in lines), failing_checks(checked)]
    partitions = html.table(PROVIDER_PARTITION_COLUMNS, partition_rows, PROVIDER_PARTITIONS_CAPTION)
    everything = html.Markup(
        f"<p>{html.link('/console/audit', 'Every operator action, filterable')}</p>"
    )
    body = html.join(
        [
            html.section(
                "providers",
                "Providers",
                html.scrolled("providers", lines_table(lines, can_act, now)),
                html.join(pacing),
            ),
            html.section("partitions", "Partitions", html.scrolled("partitions", partitions)),
            html.section("audit", "Recent operator actions", entries_table(recent), everything),
        ]
    )
    return page(request, "Providers and partitions", body)

"""The home page: is anything wrong? Counts by state, each provider's line and its last hour
drawn small (accepted sends, 429s, the oldest eligible operation against its horizon), the
pauses and a switch in progress with what on-call can do about them, each partition's oldest
eligible operation against its horizon, what is held for a person, and what failed, was
exhausted or bounced in the last day (paged). The figures refresh every few seconds without
a reload (``console.js``)."""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web

from services.admission.console import html
from services.admission.console.charts import charts_table
from services.admission.console.charts import read as read_charts
from services.admission.console.context import SETTINGS
from services.admission.console.oncall import OPERATION_COLUMNS, operation_cells
from services.admission.console.pages import notice, operation_href, page
from services.admission.console.provider_lines import lines_table, pause_text, snapshot
from services.admission.console.provider_lines import resume_link as provider_resume_link
from services.admission.console.recent_lists import LISTS, page_number, query, recent_list
from services.admission.console.recent_lists import counters as recent_counters
from shared import control, operation_views, progressive, switch
from shared.status import recent_counts

PAGE = 20  # rows of a list shown at once
STOP = "/console/providers/progressive/stop"
COUNTERS = (
    ("live", "Live", "admitted, not finished"),
    ("send", "Queued to send", "in the send streams"),
    ("in_flight", "In flight", "read by a sender, not finished"),
    ("due", "Deferred", "waiting for their next attempt"),
    ("ambiguous", "Ambiguous", "sent, outcome unknown, being settled"),
    ("review", "Held for review", "need a person"),
)
OLDEST_COLUMNS = (
    "Partition",
    "Provider",
    "Paused",
    "Operation",
    "State",
    "Age",
    "Horizon used",
    "Attempts left",
    "Last status",
    "Next attempt",
)
OLDEST_CAPTION = (
    "Horizon used: how much of the time from creation to the delivery horizon has passed."
)


def _counters(rows: list[dict[str, Any]], paused: int) -> html.Markup:
    items = [
        html.Markup(
            f'<div class="counter" data-count="{name}"><dt>{html.escape(label)}</dt>'
            f"<dd><strong>{sum(int(r[name]) for r in rows)}</strong> "
            f'<span class="hint">{html.escape(hint)}</span></dd></div>'
        )
        for name, label, hint in COUNTERS
    ]
    items.append(
        html.Markup(
            f'<div class="counter" data-count="paused"><dt>Partitions paused</dt>'
            f"<dd><strong>{paused}</strong> of {len(rows)}</dd></div>"
        )
    )
    return html.join(items)


def _progressive(plan: progressive.Plan | None, can_act: bool) -> list[html.Markup]:
    """The progressive switch under way (or the last one), its last steps, how to stop it."""
    if plan is None:
        return []
    actions = ""
    if can_act and not plan.ended:
        actions = html.join(
            [html.link(STOP, "Stop…"), html.link(STOP + "?rollback=1", "Stop and roll back…")], " "
        )
    steps = html.join(html.Markup(f"<li>{html.escape(line)}</li>") for line in plan.log[-6:])
    why = f" (failover: {plan.reason})" if plan.policy else ""
    return [
        html.Markup(
            f"<li><strong>{html.escape(plan.describe() + why)}</strong> "
            f"{actions}<ul>{steps}</ul></li>"
        )
    ]


def _pauses(
    state: control.ControlState,
    can_act: bool,
    previous: dict[int, str],
    plan: progressive.Plan | None = None,
) -> html.Markup:
    items = [
        html.Markup(
            f"<li>Provider <strong>{html.escape(name)}</strong>: {pause_text(note)}"
            f"{provider_resume_link(name, can_act)}</li>"
        )
        for name, note in sorted(state.auth_paused.items())
    ]
    for p in sorted(state.paused):
        note = state.paused_notes.get(p, {})
        action = html.link(f"/console/partitions/{p}/resume", "Resume…") if can_act else ""
        items.append(
            html.Markup(
                f"<li>Partition {p} paused since {html.when(int(note.get('since') or 0))}: "
                f"{html.escape(note.get('reason') or 'no reason given')} {action}</li>"
            )
        )
    if state.switch:
        targets = switch.Plan.from_record(state.switch).targets
        action = (
            html.link("/console/providers/switch/finish", "Finish the switch…") if can_act else ""
        )
        items.append(
            html.Markup(
                f"<li><strong>Switch in progress</strong>: "
                f"{html.escape(switch.describe(targets))} {action}</li>"
            )
        )
    elif previous:
        action = html.link("/console/providers/rollback", "Roll back…") if can_act else ""
        items.append(
            html.Markup(
                f"<li>Last switch moved partitions {html.escape(_list(previous))} away "
                f"from {html.escape(', '.join(sorted(set(previous.values()))))} "
                f"{action}</li>"
            )
        )
    items += _progressive(plan, can_act)
    if not items:
        return notice("No provider or partition is paused; no switch is in progress.")
    return html.Markup(f"<ul>{html.join(items)}</ul>")


def _list(partitions: dict[int, str]) -> str:
    return ",".join(map(str, sorted(partitions)))


def _partition_rows(
    per_partition: list[dict[str, Any] | None],
    state: control.ControlState,
    default: str,
    now: int,
) -> list[html.Markup]:
    rows = []
    for p, r in enumerate(per_partition):
        head = (p, state.provider_for(p, default), "paused" if p in state.paused else "no")
        if r is None:
            rows.append(html.row(*head, "none", *["-"] * len(OPERATION_COLUMNS)))
        else:
            op = html.link(operation_href(r["operation_id"]), r["operation_id"])
            rows.append(html.row(*head, op, *operation_cells(r, now)))
    return rows


def _review(request: web.Request, rows: list[dict[str, Any]], can_act: bool) -> html.Markup:
    number = page_number(request, "page")
    if not rows:
        return notice("Nothing is held for review.")
    shown = rows[(number - 1) * PAGE : number * PAGE]
    items = []
    for r in shown:
        href = operation_href(r["operation_id"])
        action = (
            " "
            + html.link(href + "/release", "Release…")
            + " "
            + html.link(href + "/close", "Close…")
            if can_act
            else ""
        )
        where = f"partition {html.escape(r['partition'])}, since {html.when(r['since'])}"
        items.append(
            html.Markup(f"<li>{html.link(href, r['operation_id'])} ({where}){action}</li>")
        )
    pages = (len(rows) + PAGE - 1) // PAGE
    nav = [html.Markup(f"Page {min(number, pages)} of {pages} ({len(rows)} held)")]
    if number > 1:
        nav.append(html.link("/console/?" + query(request, page=number - 1), "Previous"))
    if number < pages:
        nav.append(html.link("/console/?" + query(request, page=number + 1), "Next"))
    return html.Markup(f'<ul>{html.join(items)}</ul><p class="pager">{html.join(nav, " · ")}</p>')


async def _live(request: web.Request) -> html.Markup:
    settings = request.app[SETTINGS]
    view = await snapshot(request)
    client, can_act, now = view.client, view.can_act, view.now
    state, rows, lines = view.state, view.partitions, view.lines
    default = lines[0].name if lines else settings.provider_name
    per_partition = await operation_views.oldest_per_partition(
        client, settings.partitions, settings.max_attempts, now
    )
    actions = html.Markup("")
    if can_act:
        move = html.link("/console/providers/switch", "Switch partitions to another provider…")
        actions = html.Markup(f"<p>{move}</p>")
    counters = html.join(
        [
            _counters(rows, len(state.paused)),
            recent_counters(await recent_counts(client, settings.partitions, now)),
        ]
    )
    charts = charts_table(await read_charts(client, [line.name for line in lines], now))
    pauses = _pauses(state, can_act, await switch.previous(client), await progressive.read(client))
    oldest = html.table(
        OLDEST_COLUMNS, _partition_rows(per_partition, state, default, now), OLDEST_CAPTION
    )
    held = await operation_views.held_for_review(client, settings.partitions)
    recent = [
        html.section(
            name,
            f"Recently {label.lower()}",
            await recent_list(request, client, settings.partitions, name, now, PAGE),
        )
        for name, label, _ in LISTS
    ]
    return html.join(
        [
            html.section(
                "counts", "Operations now", html.Markup(f'<dl class="counters">{counters}</dl>')
            ),
            html.section(
                "lines",
                "Providers",
                html.scrolled("lines", lines_table(lines, can_act, now)),
                actions,
            ),
            html.section("hour", "The last hour per provider", html.scrolled("hour", charts)),
            html.section("pauses", "Pauses and switches", pauses),
            html.section(
                "oldest", "Oldest eligible operation per partition", html.scrolled("oldest", oldest)
            ),
            html.section("review", "Held for review", _review(request, held, can_act)),
            *recent,
        ]
    )


async def home(request: web.Request) -> web.Response:
    now = time.strftime("%H:%M:%S UTC", time.gmtime())
    live_url = "/console/overview/live?" + query(request)
    body = html.render("overview", live=await _live(request), now=now, live_url=live_url)
    return page(request, "Is anything wrong?", body)


async def live(request: web.Request) -> web.Response:
    """The refreshed part of the home page, for console.js."""
    return web.Response(text=await _live(request), content_type="text/html", charset="utf-8")

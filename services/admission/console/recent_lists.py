"""The home page's recently finished operations: how many failed or were exhausted, and how
many bounced, in the last hour and day; and the lists "recently failed or exhausted" and
"recently bounced", newest first, paged. Read from the bounded indexes the ending scripts
write (shared.status.recent_counts and recent)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from services.admission.console.html import Markup, escape, join, link, when
from services.admission.console.pages import notice, operation_href
from shared import status
from shared.redis import RedisClient

# The index (shared.status.RECENT_INDEXES), its label, and what an empty list says.
LISTS = (
    ("failed", "Failed or exhausted", "Nothing failed or was exhausted in the last day."),
    ("bounced", "Bounced", "No email bounced in the last day."),
)
# The home page's query: the review list's page and each list's own.
PAGE_PARAMS = ("page", *(f"{name}_page" for name, _, _ in LISTS))


def page_number(request: web.Request, param: str) -> int:
    raw = request.query.get(param, "1")
    return max(1, int(raw)) if raw.isascii() and raw.isdigit() and len(raw) < 6 else 1


def query(request: web.Request, **changed: int) -> str:
    """The home page's paging query with ``changed`` pages replaced."""
    return urlencode({p: changed.get(p, page_number(request, p)) for p in PAGE_PARAMS})


def counters(counts: dict[str, Any]) -> Markup:
    more = "+" if counts["capped"] else ""
    return join(
        Markup(
            f'<div class="counter" data-count="{name}-hour"><dt>{escape(label)}, last hour'
            f"</dt><dd><strong>{counts[name]['hour']}{more}</strong> "
            f'<span class="hint">{counts[name]["day"]}{more} in the last day</span></dd></div>'
        )
        for name, label, _ in LISTS
    )


def _item(r: dict[str, Any]) -> Markup:
    what = "bounced" if r["delivery"] == "bounced" else str(r["state"])
    reason = f", {r['reason']}" if r["reason"] else ""
    where = Markup(f"{escape(what + reason)}, partition {escape(r['partition'])}, ")
    return Markup(
        f"<li>{link(operation_href(r['operation_id']), r['operation_id'])} "
        f"({where}{when(r['at'])})</li>"
    )


async def recent_list(
    request: web.Request, client: RedisClient, partitions: int, name: str, now: int, size: int
) -> Markup:
    """One list: a page of ``size`` rows and the links to the pages beside it."""
    param = f"{name}_page"
    number = page_number(request, param)
    rows, total = await status.recent(
        client, partitions, name, now, offset=(number - 1) * size, limit=size
    )
    empty = next(text for n, _, text in LISTS if n == name)
    if not total:
        return notice(empty)
    pages = (total + size - 1) // size
    nav = [Markup(f"Page {min(number, pages)} of {pages} ({total} in the last day)")]
    if number > 1:
        nav.append(link("/console/?" + query(request, **{param: number - 1}), "Previous"))
    if number < pages:
        nav.append(link("/console/?" + query(request, **{param: number + 1}), "Next"))
    items = join(_item(r) for r in rows)
    return Markup(f'<ul>{items}</ul><p class="pager">{join(nav, " · ")}</p>')

"""Each configured provider's line, as the home page and the providers page show it: kind,
partitions it serves, what it really accepts, 429s, its pause and why (with the resume
beside it for on-call), ambiguous attempts, and a place for the preflight checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from services.admission.console import html
from services.admission.console.context import REDIS, SETTINGS
from services.admission.console.pages import principal_of
from shared import clock, control
from shared.providers.named import ProviderConfigError, provider_kinds
from shared.redis import RedisClient
from shared.status import ProviderLine, partitions_status, provider_lines

COLUMNS = (
    "Provider",
    "Kind",
    "Partitions",
    "Sending / paused why",
    "Accepting now",
    "Pacing rate",
    "429s",
    "Last 429",
    "Ambiguous",
    "Checks",
)


def configured_kinds(default: str) -> dict[str, str]:
    """The configured names and their kinds (RESETGATE_PROVIDERS), as the senders read them."""
    try:
        return provider_kinds(default)
    except ProviderConfigError:
        return {default: "misconfigured"}


def pause_text(auth: dict[str, Any] | None) -> html.Markup:
    """The provider pause: its kind, since when, and the provider's reason (escaped)."""
    if not auth:
        return html.Markup("sending")
    reason = control.sanitise(str(auth.get("reason") or ""))
    return html.Markup(
        f"<strong>paused: {html.escape(control.pause_kind(auth))}</strong> "
        f"({html.escape(auth.get('status') or '-')}) "
        f"since {html.when(int(auth.get('since') or 0))}: "
        f"{html.escape(reason or 'no reason given')}"
    )


def resume_link(name: str, can_act: bool) -> html.Markup:
    if not can_act:
        return html.Markup("")
    return html.Markup(" " + html.link(f"/console/providers/{name}/resume", f"Resume {name}…"))


def _line_row(line: ProviderLine, can_act: bool, now: int) -> html.Markup:
    status, pacing = line.status, line.pacing
    paused = pause_text(status.auth_paused)
    if status.auth_paused:
        paused = html.Markup(paused + resume_link(line.name, can_act))
    accepting = f"{pacing.accepting:.2f} sends/s" if pacing.accepting is not None else "-"
    owned = ", ".join(map(str, line.partitions)) or "none"
    checks = (
        "not run yet"
        if line.checks is None
        else (f"{len(line.checks.failing)} failing (below)" if line.checks.failing else "passing")
    )
    cells = (
        line.name,
        line.kind,
        owned,
        paused,
        accepting,
        f"{status.rate:.1f} sends/s",
        status.throttled_total,
        html.relative(status.last_throttled_at, now),
        line.ambiguous,
        checks,
    )
    return html.Markup(
        f'<tr data-provider="{html.escape(line.name)}">'
        f"{html.join(html.cell(c) for c in cells)}</tr>"
    )


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the overview and the providers page both show, read once per request: the
    control state, each partition's status and each configured provider's line."""

    client: RedisClient
    can_act: bool  # the signed-in principal may pause, resume and switch
    now: int
    state: control.ControlState
    partitions: list[dict[str, Any]]
    lines: list[ProviderLine]


async def snapshot(request: web.Request) -> Snapshot:
    client: RedisClient = request.app[REDIS]
    principal = principal_of(request)
    now = clock.now_ms()
    state = await control.read(client)
    partitions = await partitions_status(client, request.app[SETTINGS].partitions, state)
    lines = await read_lines(request, state, partitions)
    can_act = principal is not None and principal.can_act
    return Snapshot(client, can_act, now, state, partitions, lines)


async def read_lines(
    request: web.Request, state: control.ControlState, partitions: list[dict[str, Any]]
) -> list[ProviderLine]:
    client: RedisClient = request.app[REDIS]
    kinds = configured_kinds(request.app[SETTINGS].provider_name)
    return await provider_lines(client, kinds, state, partitions)


def lines_table(lines: list[ProviderLine], can_act: bool, now: int) -> html.Markup:
    return html.table(COLUMNS, [_line_row(line, can_act, now) for line in lines])

"""The read pages: find, one operation, one account. Every value is escaped by the
templates; nothing shown comes from outside the operation store except the configured
provider name."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from aiohttp import web

from services.admission.console import html
from services.admission.console.context import EVIDENCE, REDIS, SETTINGS, Principal
from services.admission.console.pages import (
    message,
    notice,
    operation_href,
    page,
    principal_of,
)
from services.admission.console.trail import for_operation as trail_for
from shared import clock, control, operation_views, ownership, tracing
from shared.archive import ARCHIVE, HISTORY, NOT_CONFIGURED, UNAVAILABLE, ArchiveUnavailable
from shared.archive import REDIS as IN_REDIS
from shared.clock import to_seconds
from shared.ids import valid_account_id
from shared.model import CLOSABLE, LIVE, QUARANTINABLE, Attempt, Delivery, Operation, State
from shared.providers.named import ProviderConfigError, provider_names

# Delivery the provider reported that means the player got no usable email: the operation
# is accepted (nothing more is sent) but support must not read that as "sent, all fine".
UNDELIVERED = frozenset({Delivery.BOUNCED, Delivery.COMPLAINED, Delivery.REJECTED})
WAITING = frozenset({State.QUEUED, State.DEFERRED})  # a paused partition holds these


def account_href(account_id: str) -> str:
    return "/console/accounts/" + quote(account_id, safe="")


def state_badge(state: str, delivery: str) -> html.Markup:
    """The state as support should read it: an accepted email that bounced is a bounce."""
    if state == State.ACCEPTED and delivery in UNDELIVERED:
        return html.Markup(
            f'<span class="state state-bounced">accepted, then {html.escape(delivery)}</span>'
        )
    return html.Markup(
        f'<span class="state state-{html.escape(state)}">{html.escape(state)}</span>'
    )


def configured_providers(default: str) -> list[str]:
    """The provider names the services are configured with (RESETGATE_PROVIDERS)."""
    try:
        return provider_names(fallback=default)
    except ProviderConfigError:
        return [default]


def provider_text(name: str, configured: list[str]) -> str:
    return name if name in configured else f"{name} (not configured: nothing sends through it)"


# -- one operation -------------------------------------------------------------------------
def _delivery(operation: Operation) -> html.Markup:
    if operation.delivery is Delivery.UNKNOWN:
        closed = operation.observation_closed_at
        why = "observation window closed" if closed else "no delivery event seen yet"
        return html.Markup(f'<span class="unknown">unknown</span> ({html.escape(why)})')
    return html.Markup(
        f"{html.escape(operation.delivery)}, observed {html.when(operation.delivery_observed_at)}"
    )


def _last_answer(operation: Operation) -> str:
    if not operation.last_outcome:
        return "no attempt finished yet"
    status = operation.last_status or "no HTTP status"
    source = operation.retry_after_source
    why = f"; the next try was timed because {SOURCES.get(source, source)}" if source else ""
    return f"{operation.last_outcome} ({status}){why}"


# What each Retry-After source (shared.retry_after.Source) means to a person reading it.
SOURCES = {
    "delta": "the provider said how many seconds to wait",
    "date": "the provider said when to try again",
    "absent": "the provider gave no wait, so we wait a little longer each time",
    "invalid": "the provider's wait was unreadable, so we wait a little longer each time",
}
_RETRY_AT = re.compile(r"^retry at (\d{12,14})$")


def _decision(attempt: Attempt) -> html.Markup:
    """The sender's decision, with its "retry at <ms>" shown as a time."""
    text = attempt.decision or attempt.reason or "-"
    match = _RETRY_AT.match(text)
    return html.Markup(f"retry at {html.when(int(match.group(1)))}") if match else html.escape(text)


def _retry_after(attempt: Attempt) -> str:
    if not attempt.retry_at or not attempt.ended_at:
        return "-"
    return html.seconds(to_seconds(attempt.retry_at - attempt.ended_at))


def _fencing(attempt: Attempt) -> html.Markup:
    """Who made the attempt, in words; the ids stay for on-call, after the words."""
    who = f"sent by {attempt.consumer}" if attempt.consumer else "sender unknown"
    parts = [
        html.escape(who),
        html.Markup(f"<small>attempt <code>{html.escape(attempt.attempt_id)}</code></small>"),
    ]
    if attempt.reason == "lease_expired":
        parts.append(
            html.escape(
                "the sender stopped answering: this attempt was checked with the "
                "provider instead of being sent again"
            )
        )
    if attempt.reconciled:
        parts.append(html.escape(f"checked with the provider: {attempt.reconciled}"))
    return html.join(parts, "<br>")


def _timeline(ledger: list[Attempt]) -> html.Markup:
    if not ledger:
        return notice("No attempt yet.")
    rows = [
        html.row(
            a.number or "-",
            html.when(a.started_at),
            html.when(a.ended_at),
            a.outcome,
            a.http_status or "-",
            _retry_after(a),
            SOURCES.get(a.retry_after_source, a.retry_after_source or "-"),
            html.when(a.retry_at),
            _decision(a),
            html.Markup(f"<code>{html.escape(a.template)}</code>") if a.template else "-",
            _fencing(a),
        )
        for a in ledger
    ]
    return html.render("timeline", rows=html.join(rows))


def _entry_points(operation: Operation) -> html.Markup:
    if not operation.entry_points:
        return notice("None recorded.")
    rows = [html.row(name, count) for name, count in sorted(operation.entry_points.items())]
    return html.table(("Entry point", "Requests"), rows)


CASE_COLUMNS = ("Case", "Queue", "Priority", "Topic", "State when routed", "Routed")


def _case_row(case: dict[str, str]) -> html.Markup:
    fields = ("case_id", "queue", "priority", "topic", "state")
    return html.row(
        *(case.get(f) or "-" for f in fields), html.when(int(case.get("routed_at") or 0))
    )


def _cases(cases: list[dict[str, str]]) -> html.Markup:
    if not cases:
        return notice("No support case mentions this operation.")
    return html.table(CASE_COLUMNS, [_case_row(c) for c in cases])


def _actions(operation: Operation, principal: Principal) -> html.Markup:
    base = operation_href(operation.operation_id)
    links = []
    if operation.state in QUARANTINABLE:
        links.append(html.link(base + "/quarantine", "Quarantine…"))
    if operation.state is State.QUARANTINED:
        links.append(html.link(base + "/release", "Release…"))
    if operation.state is State.REVIEW:
        links.append(html.link(base + "/release", "Release from review…"))
    if operation.state in CLOSABLE:
        links.append(html.link(base + "/close", "Close without sending…"))
    if not links:
        return html.Markup("")
    if not principal.can_act:
        return notice("Actions need the act role; you can read only.")
    heading = html.Markup(
        '<section class="actions" aria-labelledby="actions-h"><h2 id="actions-h">Actions</h2>'
    )
    return html.Markup(f"{heading}<p>{html.join(links, ' · ')}</p></section>")


def _horizon(operation: Operation, now: int) -> html.Markup:
    return html.relative(operation.horizon_at, now)


def _provider(default: str, operation: Operation, state: control.ControlState) -> str:
    """Its owner and why (after a switch an ambiguous operation stays with its provider),
    flagged when no service is configured with it."""
    configured = configured_providers(default)
    held = ownership.owner(operation, state, configured[0])
    return f"{provider_text(held.provider, configured)} ({held.why})"


def _owner(default: str, operation: Operation, state: control.ControlState) -> str:
    return ownership.owner(operation, state, configured_providers(default)[0]).provider


def _next_attempt(
    operation: Operation, state: control.ControlState, now: int, owner: str, can_act: bool
) -> html.Markup:
    """A paused partition's or provider's operation is not late: it waits for a resume, and
    says so, with the resume beside it for on-call."""
    if operation.state in WAITING and owner in state.auth_paused:
        kind = control.pause_kind(state.auth_paused[owner])
        action = (
            html.link(f"/console/providers/{owner}/resume", f"Resume {owner}…") if can_act else ""
        )
        return html.Markup(
            f"<strong>waiting for provider {html.escape(owner)} to resume</strong> (paused: "
            f"{html.escape(kind)}); nothing is sent until then {action}"
        )
    if operation.state in WAITING and operation.partition in state.paused:
        note = state.paused_notes.get(operation.partition, {})
        why = f" ({html.escape(note['reason'])})" if note.get("reason") else ""
        return html.Markup(
            f"<strong>waits for partition {operation.partition} to be resumed</strong>"
            f": it is paused{why}; nothing is sent until then"
        )
    return html.relative(operation.next_attempt_at, now)


def _throttles(operation: Operation) -> str:
    """Throttles are the provider's brake: waiting, never failing, never an attempt."""
    if not operation.throttles:
        return "none"
    waiting = operation.state in (State.QUEUED, State.DEFERRED)
    tail = "; waiting for the provider, not failing" if waiting else ""
    return f"{operation.throttles} (not counted as attempts{tail})"


def _trace(operation: Operation, trace_url: str) -> html.Markup | str:
    """The admission's trace id, linked to the trace UI when one is configured."""
    trace_id = tracing.trace_id_of(operation.traceparent)
    if not trace_id:
        return "not traced"
    if not trace_url:
        return html.Markup(f"<code>{trace_id}</code>")  # 32 hex digits: nothing to escape
    return html.link(trace_url.replace("{trace_id}", trace_id), trace_id)


def _operation_values(operation: Operation, max_attempts: int, now: int) -> dict[str, Any]:
    return {
        "operation_id": operation.operation_id,
        "account": html.link(account_href(operation.account_id), operation.account_id),
        "state": state_badge(operation.state, operation.delivery),
        "reason": f"({operation.reason})" if operation.reason not in ("", operation.state) else "",
        "partition": operation.partition,
        "created": html.relative(operation.created_at, now),
        "attempts": operation.attempts,
        "max_attempts": max_attempts,
        "remaining": operation_views.remaining_attempts(operation, max_attempts),
        "throttles": _throttles(operation),
        "last_answer": _last_answer(operation),
        "horizon": _horizon(operation, now),
        "token_expires": html.relative(operation.token_expires_at, now),
        "token_used": html.when(operation.token_consumed_at)
        if operation.token_consumed_at
        else "not used",
        "delivery": _delivery(operation),
    }


# Where the page read the operation: said above everything else on it. (Not SOURCES: that
# name is the Retry-After sources' words, which the timeline shows.)
READ_FROM = {
    IN_REDIS: notice("Read from Redis (the live store)."),
    ARCHIVE: notice("Read from the archive: Redis no longer holds this operation."),
}


async def operation_page(request: web.Request) -> web.Response:
    """Read where it lives: Redis, else the archive; the page says which."""
    settings = request.app[SETTINGS]
    client = request.app[REDIS]
    try:
        found = await request.app[EVIDENCE].operation(request.match_info["operation_id"])
    except ArchiveUnavailable:
        return message(
            request,
            503,
            "Archive unavailable",
            "Redis no longer holds this "
            "operation and the archive did not answer; try again shortly.",
        )
    if found is None:
        return message(
            request, 404, "No such operation", "There is no recovery operation with this id."
        )
    detail, source = found
    operation = detail.operation
    principal = principal_of(request)
    assert principal is not None  # the auth middleware let the request through
    state, now = await control.read(client), clock.now_ms()
    body = html.render(
        "operation",
        **_operation_values(operation, settings.max_attempts, now),
        next_attempt=_next_attempt(
            operation,
            state,
            now,
            _owner(settings.provider_name, operation, state),
            principal.can_act,
        ),
        provider=_provider(settings.provider_name, operation, state),
        actions=_actions(operation, principal),
        timeline=_timeline(detail.ledger),
        entry_points=_entry_points(operation),
        cases=_cases(await operation_views.operation_cases(client, operation)),
        trail=await trail_for(request, operation.operation_id),
        trace=_trace(operation, settings.console_trace_url),
    )
    return page(request, "Recovery operation", html.Markup(READ_FROM[source] + body))


# -- one account ---------------------------------------------------------------------------
# What became of the archive's part of an account's history, said above the list.
HISTORY_FROM = {
    ARCHIVE: notice(
        "Redis and the archive were read: operations Redis no longer holds are "
        "listed from the archive."
    ),
    NOT_CONFIGURED: notice("No archive is configured: only what Redis still holds is listed."),
    UNAVAILABLE: notice(
        "The archive did not answer: only what Redis still holds is listed; try again shortly."
    ),
}
STORES = {IN_REDIS: "Redis", ARCHIVE: "archive"}


def _which(operation: Operation, newest: bool) -> str:
    if operation.state in LIVE:
        return "live"
    return "last" if newest else "earlier"


async def account_page(request: web.Request) -> web.Response:
    """The account's operations, newest first: Redis first, the archive for what Redis no
    longer holds; each row says which store answered. The directory is never asked, so the
    page is the same whether or not an account with this id exists."""
    account_id = request.match_info["account_id"]
    if "@" in account_id or not valid_account_id(account_id):
        return message(request, 422, "Account", "This is not an account id.")
    history, archive = await request.app[EVIDENCE].history(account_id, 0, HISTORY)
    rows = [
        html.row(
            _which(detail.operation, index == 0),
            html.link(operation_href(detail.operation.operation_id), detail.operation.operation_id),
            state_badge(detail.operation.state, detail.operation.delivery),
            html.when(detail.operation.created_at),
            detail.operation.attempts,
            detail.operation.delivery,
            STORES[source],
        )
        for index, (detail, source) in enumerate(history)
    ]
    if rows:
        columns = ("Which", "Operation", "State", "Created", "Attempts", "Delivery", "Read from")
        body = html.table(
            columns, rows, f"Recovery operations on record for account id {account_id}"
        )
    else:
        body = notice(f"No recovery operation on record for account id {account_id}.")
    return page(request, "Account", html.Markup(HISTORY_FROM[archive] + body))

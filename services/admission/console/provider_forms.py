"""The provider actions on-call takes from the console: resume a paused provider, switch
partitions to another provider, finish a switch in progress, roll the last one back. Each
is a confirmation page naming its effect, refused without the act role, and the same
function ``resetgate ops`` calls (``shared.actions``), which records it in the trail."""

from __future__ import annotations

from aiohttp import web

from services.admission.console.context import REDIS, SETTINGS
from services.admission.console.forms import REASON_FIELD, _actor, _confirm, _reason
from services.admission.console.html import Markup, escape, join
from services.admission.console.pages import message
from services.admission.console.provider_lines import configured_kinds
from shared import actions, control, progressive, switch

BACK = "/console/"
# A console request waits this long for in-flight sends; the switch then stays paused and
# "Finish the switch" (or the CLI's same switch) completes it.
CONSOLE_WAIT_SECONDS = 10.0


def _configured(request: web.Request) -> list[str]:
    return list(configured_kinds(request.app[SETTINGS].provider_name))


def _provider(request: web.Request) -> str:
    name = request.match_info["provider"]
    if name not in _configured(request):
        raise web.HTTPNotFound()
    return name


async def confirm_resume(request: web.Request) -> web.Response:
    _actor(request)
    name = _provider(request)
    note = (await control.read(request.app[REDIS])).auth_paused.get(name)
    if note is None:
        return message(request, 409, "Resume provider", f"Provider {name} is not paused.", BACK)
    question = (
        f"Resume provider {name} (paused: {control.pause_kind(note)})? Every sender starts "
        f"sending through {name} again within about a second; if its cause is not fixed, the "
        "next refusal pauses it again."
    )
    return _confirm(request, "Resume provider", question, f"Resume {name}", BACK)


async def resume(request: web.Request) -> web.Response:
    principal = _actor(request)
    name = _provider(request)
    resumed = await actions.provider_resume(request.app[REDIS], name, principal.actor)
    if not resumed.kind:
        return message(request, 409, "Resume provider", f"Provider {name} was not paused.", BACK)
    raise web.HTTPSeeOther("/console/?result=provider-resumed")


def _switch_fields(request: web.Request) -> Markup:
    options = join(
        Markup(f'<option value="{escape(n)}">{escape(n)}</option>') for n in _configured(request)
    )
    last = request.app[SETTINGS].partitions - 1
    return Markup(
        f'<label for="partitions">Partitions <span class="hint">(e.g. 0-1 or 0,3; 0 to {last})'
        '</span></label><input id="partitions" name="partitions" type="text" required '
        'maxlength="200">'
        f'<label for="to">To provider</label><select id="to" name="to">{options}</select>'
        '<label><input type="checkbox" name="progressive" value="1"> Progressively: one '
        "partition first, watched, then wider while the provider holds; rolled back when it "
        "does not (docs/failover.md)</label>" + REASON_FIELD
    )


async def confirm_switch(request: web.Request) -> web.Response:
    _actor(request)
    question = (
        "Switch partitions to another provider? Their senders pause, in-flight sends finish, "
        "then the partitions send through the chosen provider and resume. An operation with an "
        "unresolved ambiguous attempt stays with its provider until settled: nothing is sent "
        "twice."
    )
    return _confirm(request, "Switch provider", question, "Switch", BACK, _switch_fields(request))


async def _done(request: web.Request, title: str, outcome: switch.Outcome) -> web.Response:
    if outcome.done:
        raise web.HTTPSeeOther("/console/?result=switched")
    return message(request, 409, title, outcome.message, BACK)


async def do_switch(request: web.Request) -> web.Response:
    principal = _actor(request)
    form = await request.post()
    to = str(form.get("to", ""))
    if not (reason := await _reason(request)):
        return message(request, 422, "Switch provider", "Give a reason.", request.path)
    try:
        chosen = switch.parse_partitions(
            str(form.get("partitions", "")), request.app[SETTINGS].partitions
        )
    except ValueError as error:
        return message(request, 422, "Switch provider", str(error).replace("--", ""), request.path)
    if form.get("progressive"):
        return await _progressive(request, chosen, to, principal.actor, reason)
    outcome = await actions.provider_switch(
        request.app[REDIS],
        dict.fromkeys(chosen, to),
        _configured(request),
        CONSOLE_WAIT_SECONDS,
        principal.actor,
        reason,
    )
    return await _done(request, "Switch provider", outcome)


async def _progressive(
    request: web.Request, chosen: list[int], to: str, actor: str, reason: str
) -> web.Response:
    """Hand the switch to the senders' driver (shared.progressive_run); the home page
    shows its steps."""
    client, configured = request.app[REDIS], _configured(request)
    try:
        if to not in configured:
            raise progressive.Refused(f"provider {to!r} is not configured")
        plan = progressive.plan_for(
            await control.read(client),
            to,
            chosen,
            configured,
            progressive.Limits.of(request.app[SETTINGS]),
            actor,
            reason,
        )
        refused = await actions.progressive_switch(client, plan)
    except progressive.Refused as error:
        refused = str(error)
    if refused:
        return message(request, 409, "Switch provider", f"Refused: {refused}", BACK)
    raise web.HTTPSeeOther("/console/?result=progressive")


async def confirm_stop(request: web.Request) -> web.Response:
    _actor(request)
    plan = await progressive.running(request.app[REDIS])
    if plan is None:
        return message(request, 409, "Stop the switch", "No progressive switch is under way.", BACK)
    rollback = request.query.get("rollback") == "1"
    then = (
        "every partition it moved goes back where it was"
        if rollback
        else "the partitions it moved stay where they are"
    )
    field = Markup('<input type="hidden" name="rollback" value="1">') if rollback else Markup("")
    return _confirm(
        request,
        "Stop the switch",
        f"Stop {plan.describe()}? No further step; {then}.",
        "Stop",
        BACK,
        field,
    )


async def stop(request: web.Request) -> web.Response:
    principal = _actor(request)
    form = await request.post()
    plan = await actions.progressive_stop(
        request.app[REDIS], principal.actor, form.get("rollback") == "1"
    )
    if plan is None:
        return message(request, 409, "Stop the switch", "No progressive switch is under way.", BACK)
    raise web.HTTPSeeOther("/console/?result=progressive-stop")


async def confirm_finish(request: web.Request) -> web.Response:
    _actor(request)
    state = await control.read(request.app[REDIS])
    if state.switch is None:
        return message(request, 409, "Finish the switch", "No switch is in progress.", BACK)
    targets = switch.Plan.from_record(state.switch).targets
    question = (
        f"Finish the switch in progress ({switch.describe(targets)})? It waits for in-flight "
        "sends, then assigns and resumes the partitions."
    )
    return _confirm(request, "Finish the switch", question, "Finish", BACK)


async def finish(request: web.Request) -> web.Response:
    principal = _actor(request)
    client = request.app[REDIS]
    state = await control.read(client)
    if state.switch is None:
        return message(request, 409, "Finish the switch", "No switch is in progress.", BACK)
    targets = switch.Plan.from_record(state.switch).targets
    outcome = await actions.provider_switch(
        client, targets, _configured(request), CONSOLE_WAIT_SECONDS, principal.actor, "finish"
    )
    return await _done(request, "Finish the switch", outcome)


async def confirm_rollback(request: web.Request) -> web.Response:
    _actor(request)
    targets = await switch.rollback_targets(request.app[REDIS])
    if not targets:
        return message(request, 409, "Roll back", switch.ROLLBACK_NOTHING, BACK)
    question = (
        f"Roll back: {switch.describe(targets)}? Their senders pause, in-flight sends finish, "
        "then the partitions send through these providers again."
    )
    return _confirm(request, "Roll back the switch", question, "Roll back", BACK, REASON_FIELD)


async def rollback(request: web.Request) -> web.Response:
    principal = _actor(request)
    if not (reason := await _reason(request)):
        return message(request, 422, "Roll back", "Give a reason.", request.path)
    outcome = await actions.provider_rollback(
        request.app[REDIS], _configured(request), CONSOLE_WAIT_SECONDS, principal.actor, reason
    )
    return await _done(request, "Roll back the switch", outcome)


def add_routes(app: web.Application) -> None:
    router = app.router
    router.add_get("/console/providers/switch", confirm_switch)
    router.add_post("/console/providers/switch", do_switch)
    router.add_get("/console/providers/switch/finish", confirm_finish)
    router.add_post("/console/providers/switch/finish", finish)
    router.add_get("/console/providers/progressive/stop", confirm_stop)
    router.add_post("/console/providers/progressive/stop", stop)
    router.add_get("/console/providers/rollback", confirm_rollback)
    router.add_post("/console/providers/rollback", rollback)
    router.add_get("/console/providers/{provider}/resume", confirm_resume)
    router.add_post("/console/providers/{provider}/resume", resume)

"""Provider modes: the sandbox answering as SendGrid, Postmark or Mailgun document.

Each mode (``RESETGATE_SANDBOX_MODE``) is a :class:`Dialect`: how that provider
authenticates, parses a send, and shapes its accepted, throttled, refused and failed
answers. The flow — auth, the send bucket, fault injection, reject domain, slow and
dropped answers, recording — is this sandbox's own, shared with the ``http`` mode. The
documentation page each shape comes from is named in the provider's module and tests.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from aiohttp import web

from services.sandbox import provider
from services.sandbox.responses import SANDBOX
from services.sandbox.state import Sandbox
from services.sandbox.store import JsonDict, Message
from services.sandbox.webhooks import Hook, install

Handler = Callable[[web.Request], Awaitable[web.Response]]

Parsed = JsonDict | web.Response  # the generic body (taken), or the provider's refusal


def taken(
    sender: str, to: list[str], tags: object, subject: str = "", text: str = "", html: str = ""
) -> JsonDict:
    """The generic body of a send a dialect takes: what the inbox and the feed record,
    whatever the provider's own shape."""
    return {"from": sender, "to": to, "subject": subject, "text": text, "html": html, "tags": tags}


def taken_templated(
    sender: str, to: list[str], tags: object, template: str, data: object, subject: str = ""
) -> JsonDict:
    """The generic body of a send with a provider-hosted template: nothing rendered here,
    the template and its data instead."""
    return {**taken(sender, to, tags, subject), "template": template, "template_data": data}


@dataclass(frozen=True, slots=True)
class Dialect:
    send_path: str
    authorized: Callable[[web.Request, str], bool]
    parse: Callable[[web.Request, int], Awaitable[Parsed]]
    accepted: Callable[[Message], web.Response]
    unauthorized: Callable[[], web.Response]
    throttled: Callable[[Sandbox, float], web.Response]
    failed: Callable[[int], web.Response]
    rejected: Callable[[], web.Response]
    lookup_path: str = ""
    lookup: Callable[[web.Request, Sandbox], web.Response] | None = None
    # Delivery events pushed to ``webhook_url`` (services/sandbox/webhooks.py), and the
    # provider's routes that go with them (SendGrid's public verification key).
    hook: Hook | None = None
    routes: tuple[tuple[str, str, Handler], ...] = ()
    # Rate-limit headers a provider puts on every answer, accepted ones too (SendGrid).
    rate_headers: Callable[[Sandbox], dict[str, str]] | None = None
    # The provider's documented refusals of a whole account or domain, by the name
    # ``RESETGATE_SANDBOX_REFUSAL`` gives: every send answers it while it is set.
    refusals: dict[str, Handler] | None = None
    # A send with a provider-hosted template: its own route where the provider has one
    # (Postmark's /email/withTemplate; "" = the send route takes both), and the answer to a
    # template the account lacks (None: the provider accepts it and drops the message later).
    template_path: str = ""
    template_parse: Callable[[web.Request, int], Awaitable[Parsed]] | None = None
    missing_template: Callable[[str], web.Response] | None = None


def _refusal(request: web.Request, sandbox: Sandbox, dialect: Dialect) -> web.Response | None:
    key = sandbox.settings.api_key.get_secret_value()
    if not dialect.authorized(request, key) or sandbox.settings.revoked_status:
        sandbox.stats.count("auth")
        return dialect.unauthorized()
    wait = sandbox.send_bucket.take() if request.method == "POST" else sandbox.poll_bucket.take()
    if wait > 0:
        sandbox.count_throttled("send_throttled" if request.method == "POST" else "poll_throttled")
        return dialect.throttled(sandbox, wait)
    return None


def sender(dialect: Dialect) -> Handler:
    async def send(request: web.Request) -> web.Response:
        sandbox = request.app[SANDBOX]
        refused = _refusal(request, sandbox, dialect)
        if refused is not None:
            return refused
        if sandbox.settings.refusal:
            sandbox.stats.count("refused")
            return await _refuse(request, dialect, sandbox.settings.refusal)
        body = await dialect.parse(request, sandbox.settings.max_body_bytes)
        if isinstance(body, web.Response):
            sandbox.stats.count("bad_request")
            return body
        missing = _missing_template(sandbox, dialect, body)
        if missing is not None:
            sandbox.stats.count("bad_request")
            return missing
        if sandbox.faults.error.fires(sandbox.faults.rng):
            sandbox.stats.count("error")
            return dialect.failed(sandbox.settings.error_status)
        reject = sandbox.settings.reject_domain
        if reject and reject in provider.domains(body):
            sandbox.stats.count("rejected")
            return dialect.rejected()
        return await provider.accept(
            request, sandbox, body, None, _accepted(dialect, sandbox), dialect.failed
        )

    return send


async def _refuse(request: web.Request, dialect: Dialect, name: str) -> web.Response:
    handler = (dialect.refusals or {}).get(name)
    if handler is None:
        known = ", ".join(sorted(dialect.refusals or {})) or "none"
        return web.json_response(
            {"error": "unknown_refusal", "message": f"this mode's refusals: {known}"}, status=400
        )
    return await handler(request)


def _missing_template(sandbox: Sandbox, dialect: Dialect, body: JsonDict) -> web.Response | None:
    name = str(body.get("template") or "")
    known = {t.strip() for t in sandbox.settings.templates.split(",") if t.strip()}
    if not name or dialect.missing_template is None or name in known:
        return None
    return dialect.missing_template(name)


def _accepted(dialect: Dialect, sandbox: Sandbox) -> Callable[[Message], web.Response]:
    rate_headers = dialect.rate_headers
    if rate_headers is None:
        return dialect.accepted

    def accepted(message: Message) -> web.Response:
        response = dialect.accepted(message)
        response.headers.update(rate_headers(sandbox))
        return response

    return accepted


def looker(
    dialect: Dialect, lookup: Callable[[web.Request, Sandbox], web.Response]
) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def look(request: web.Request) -> web.Response:
        sandbox = request.app[SANDBOX]
        refused = _refusal(request, sandbox, dialect)
        if refused is not None:
            return refused
        if sandbox.faults.poll_error.fires(sandbox.faults.rng):
            sandbox.stats.count("poll_error")
            return dialect.failed(sandbox.settings.error_status)
        return lookup(request, sandbox)

    return look


def by_operation(sandbox: Sandbox, operation_id: str) -> list[Message]:
    """Messages recorded for an operation, newest first (the store keeps them bounded)."""
    found = [m for m in sandbox.store.messages.values() if m.operation_id == operation_id]
    return sorted(found, key=lambda m: m.created_at, reverse=True)


def add_routes(app: web.Application, dialect: Dialect) -> None:
    app.router.add_post(dialect.send_path, sender(dialect))
    if dialect.template_path and dialect.template_parse is not None:
        templated = replace(dialect, parse=dialect.template_parse)
        app.router.add_post(dialect.template_path, sender(templated))
    if dialect.lookup is not None:
        app.router.add_get(dialect.lookup_path, looker(dialect, dialect.lookup))
    if dialect.hook is not None:
        install(app, dialect.hook)
    for method, path, handler in dialect.routes:
        app.router.add_route(method, path, handler)

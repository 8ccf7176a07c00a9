"""The read-only account endpoints `resetgate providers check` asks, answered as each
provider documents them (the preflight, shared/preflight/):

- SendGrid ``GET /v3/scopes`` -> ``{"scopes": [...]}``
  (twilio.com/docs/sendgrid/api-reference/api-key-permissions/retrieve-a-list-of-scopes-for-which-this-user-has-access);
  ``GET /v3/whitelabel/domains`` -> a list of ``{"id", "domain", "subdomain", "valid"}``
  (twilio.com/docs/sendgrid/api-reference/domain-authentication/list-all-authenticated-domains),
  403 to a key without ``whitelabel.read``; ``GET /v3/verified_senders`` ->
  ``{"results": [{"from_email", "verified"}]}``
  (twilio.com/docs/sendgrid/api-reference/sender-verification/get-all-verified-senders).
- Postmark ``GET /server`` -> the server, with ``DeliveryType`` "Live" or "Sandbox"
  (postmarkapp.com/developer/api/server-api, postmarkapp.com/developer/api/servers-api).
- Mailgun ``GET /v3/domains/{name}`` -> ``{"domain": {"name", "state", ...},
  "receiving_dns_records", "sending_dns_records"}``, 404 ``{"message": "Domain not found"}``
  for a domain the account (in this region) lacks
  (documentation.mailgun.com/docs/mailgun/api-reference/openapi-final/tag/Domains).

The account's domains are ``RESETGATE_SANDBOX_DOMAINS`` (verified) and
``RESETGATE_SANDBOX_UNVERIFIED_DOMAINS``; the key's scopes ``RESETGATE_SANDBOX_KEY_SCOPES``;
Postmark's server type ``RESETGATE_SANDBOX_SERVER_DELIVERY_TYPE``.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from services.sandbox.modes import Dialect, Handler
from services.sandbox.responses import SANDBOX, json_response
from services.sandbox.settings import SandboxSettings

Answer = Callable[[web.Request, SandboxSettings], web.Response]


def _names(value: str) -> list[str]:
    return [x.strip().lower() for x in value.split(",") if x.strip()]


def guarded(dialect: Dialect, answer: Answer) -> Handler:
    """``answer`` behind the dialect's own key check (its documented 401)."""

    async def handle(request: web.Request) -> web.Response:
        settings = request.app[SANDBOX].settings
        if not dialect.authorized(request, settings.api_key.get_secret_value()):
            return dialect.unauthorized()
        return answer(request, settings)

    return handle


def _forbidden() -> web.Response:
    return json_response({"errors": [{"field": None, "message": "access forbidden"}]}, 403)


def sendgrid_scopes(_request: web.Request, settings: SandboxSettings) -> web.Response:
    return json_response({"scopes": _names(settings.key_scopes)})


def sendgrid_domains(_request: web.Request, settings: SandboxSettings) -> web.Response:
    if "whitelabel.read" not in _names(settings.key_scopes):
        return _forbidden()
    rows = [
        {"id": n, "domain": d, "subdomain": "em", "valid": valid}
        for n, (d, valid) in enumerate(_domains(settings), 1)
    ]
    return json_response(rows)


def sendgrid_senders(_request: web.Request, settings: SandboxSettings) -> web.Response:
    return json_response({"results": []})  # the sandbox's account verifies domains only


def postmark_server(_request: web.Request, settings: SandboxSettings) -> web.Response:
    return json_response(
        {
            "ID": 1,
            "Name": "sandbox",
            "DeliveryType": settings.server_delivery_type,
            "SmtpApiActivated": True,
        }
    )


def mailgun_domain(request: web.Request, settings: SandboxSettings) -> web.Response:
    name = request.match_info["name"].lower()
    for domain, valid in _domains(settings):
        if domain == name:
            state = "active" if valid else "unverified"
            return json_response(
                {
                    "domain": {"name": domain, "state": state, "type": "custom"},
                    "receiving_dns_records": [],
                    "sending_dns_records": [],
                }
            )
    return json_response({"message": "Domain not found"}, 404)


def _domains(settings: SandboxSettings) -> list[tuple[str, bool]]:
    return [(d, True) for d in _names(settings.domains)] + [
        (d, False) for d in _names(settings.unverified_domains)
    ]


ROUTES: dict[str, tuple[tuple[str, Answer], ...]] = {
    "sendgrid": (
        ("/v3/scopes", sendgrid_scopes),
        ("/v3/whitelabel/domains", sendgrid_domains),
        ("/v3/verified_senders", sendgrid_senders),
    ),
    "postmark": (("/server", postmark_server),),
    "mailgun": (("/v3/domains/{name}", mailgun_domain),),
}


def add_routes(app: web.Application, mode: str, dialect: Dialect) -> None:
    for path, answer in ROUTES.get(mode, ()):
        app.router.add_get(path, guarded(dialect, answer))

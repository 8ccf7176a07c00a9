"""The find box every page carries: an operation id, an account id, or a login.

A POST, so what was typed never lands in an address bar, a proxy log or history, and it is
never echoed back (it may be an address someone pasted). A login is resolved by the account
directory admission asks (the studio's over HTTP, or the Redis stand-in when
``RESETGATE_DIRECTORY_URL`` is unset); the account's page then lists its operations. When
the login cannot be resolved the page says why: unknown to the directory, which directory
that was, or the directory did not answer."""

from __future__ import annotations

import logging

from aiohttp import web

from services.admission.console.context import DIRECTORY, SETTINGS
from services.admission.console.pages import message, operation_href, principal_of
from services.admission.console.views import account_href
from shared import operation_views
from shared.directory import DirectoryError
from shared.ids import valid_account_id
from shared.logging import event

log = logging.getLogger("services.admission.console")

BY_LOGIN = "login"
MAX_QUERY = 128  # the field's maxlength; a longer one is no id and no login we send on


async def find(request: web.Request) -> web.StreamResponse:
    form = await request.post()
    query = str(form.get("q", "")).strip()
    if str(form.get("by", "")) == BY_LOGIN:
        return await _by_login(request, query)
    partitions = request.app[SETTINGS].partitions
    if operation_views.operation_partition(query, partitions) is not None:
        raise web.HTTPSeeOther(operation_href(query))
    if "@" not in query and valid_account_id(query):
        raise web.HTTPSeeOther(account_href(query))
    return message(
        request,
        422,
        "Find",
        "Enter an account id or an operation id (op-…), or choose “login” to find an "
        "account by its login; nothing else is searched.",
    )


def _not_found(request: web.Request) -> web.Response:
    if request.app[SETTINGS].directory_url:
        text = "The account directory has no account with this login."
    else:
        text = (
            "No account directory is configured (RESETGATE_DIRECTORY_URL is unset): logins "
            "are looked up in the local stand-in, which has no account with this login. "
            "Search by account id, or configure the studio's directory."
        )
    return message(request, 404, "Find by login", text)


async def _by_login(request: web.Request, login: str) -> web.StreamResponse:
    """The directory's account for ``login``, then that account's page (its operations)."""
    principal = principal_of(request)
    actor = principal.actor if principal else "-"
    if not login or len(login) > MAX_QUERY:
        return message(request, 422, "Find by login", "Enter a login.")
    try:
        account = await request.app[DIRECTORY].lookup_login(login)
    except DirectoryError as error:
        event(
            log,
            logging.WARNING,
            "console find by login",
            actor=actor,
            result="unavailable",
            error=str(error),
        )
        return message(
            request,
            503,
            "Find by login",
            "The account directory did not answer, so the login could not be resolved; try "
            "again shortly, or search by account id.",
        )
    # The login itself is never logged: it names a player.
    event(
        log,
        logging.INFO,
        "console find by login",
        actor=actor,
        result="found" if account else "unknown",
    )
    if account is None:
        return _not_found(request)
    raise web.HTTPSeeOther(account_href(account.account_id) + "?result=by-login")

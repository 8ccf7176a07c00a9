"""Who may use the console: a trusted auth proxy's identity header, or a session opened on
the sign-in form with the internal API token; roles (read, act); CSRF on every POST.

Sessions live in Redis under the SHA-256 of their id (a reader of the store cannot take
one over), so every admission replica honours them and signing out ends them at once. The
cookie is HttpOnly, SameSite=Strict, Path=/console/ and Secure unless turned off for a
plain-HTTP loopback setup. A form's CSRF token is an HMAC, under a key derived from the
internal API token, of what the principal is bound to: one value per session (or proxy
user) that another site can neither read nor forge.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import re
import secrets
import unicodedata

from aiohttp import web

from services.admission.console.context import (
    ACT,
    CSRF_KEY,
    READ,
    REDIS,
    SETTINGS,
    Principal,
)
from services.admission.ratelimit import request_client
from services.admission.settings import AdmissionSettings, names
from shared import clock
from shared.keys import console_session
from shared.logging import event

log = logging.getLogger("services.admission.console")
# A proxy identity that is not one plain name: no role, and a page that says why.
REFUSED = Principal(
    "console:refused",
    frozenset(),
    "proxy",
    "",
    refusal=(
        "The identity your sign-in proxy sent is not one plain name in Unicode NFC; ask whoever "
        "runs the proxy."
    ),
)

COOKIE = "rg_console"
COOKIE_PATH = "/console/"
_NAME = re.compile(r"[^A-Za-z0-9._-]")
MAX_NAME = 64
MAX_IDENTITY = 256  # what a proxy asserts (an address, a subject): RFC 5321's path limit
# Unicode categories no identity holds: controls, format characters (zero-width, bidi
# overrides), surrogates (undecodable bytes), private and unassigned code points, spaces.
_NOT_IN_NAMES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"})


def csrf_key(internal_api_token: str) -> bytes:
    return hmac.new(internal_api_token.encode(), b"resetgate console csrf v1", "sha256").digest()


def csrf_token(key: bytes, principal: Principal) -> str:
    # Hex, not base64url: 64 characters never look like a reset token to the log scrubber.
    return hmac.new(key, principal.binding.encode(), "sha256").hexdigest()


def csrf_valid(key: bytes, principal: Principal, offered: str) -> bool:
    return hmac.compare_digest(
        csrf_token(key, principal).encode(), offered.encode("utf-8", "replace")
    )


def actor_name(raw: str) -> str:
    """A short, plain name for the audit record: an address keeps only its local part (the
    console never shows an address), anything else outside [A-Za-z0-9._-] is dropped."""
    local = raw.strip().split("@", 1)[0]
    return _NAME.sub("", local)[:MAX_NAME] or "unnamed"


def proxy_identity(raw: str) -> str | None:
    """The identity a proxy asserted, exactly as sent, or None when it is no usable name:
    empty, too long, holding a control, format or space character, or not in Unicode NFC
    (a name that normalises to another string would read as that one). Roles are matched on
    it unchanged: no case folding, which would merge names an identity provider keeps apart
    (``ß``/``ss``, the Kelvin sign and ``K``); a spelling that differs gets no role."""
    if not 0 < len(raw) <= MAX_IDENTITY or unicodedata.normalize("NFC", raw) != raw:
        return None
    if any(unicodedata.category(char) in _NOT_IN_NAMES for char in raw):
        return None
    return raw


def proxy_actor(key: bytes, identity: str) -> str:
    """The audit name of a proxy identity: its plain name, and, unless the identity is that
    name, a keyed digest of the whole, so ``maria@studio.example`` and ``maria@attacker.example``
    are two actors while neither address is written anywhere."""
    name = actor_name(identity)
    if name == identity:
        return f"console:{name}"
    digest = hmac.new(key, b"actor:" + identity.encode(), "sha256").hexdigest()[:12]
    return f"console:{name}.{digest}"


def token_matches(settings: AdmissionSettings, offered: str) -> bool:
    expected = settings.internal_api_token.get_secret_value().encode()
    return hmac.compare_digest(offered.encode("utf-8", "surrogateescape"), expected)


def _session_hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


# -- the trusted proxy ---------------------------------------------------------------------
def _from_trusted_proxy(request: web.Request, settings: AdmissionSettings) -> bool:
    peer = request.transport.get_extra_info("peername") if request.transport else None
    if not peer:
        return False
    try:
        address = ipaddress.ip_address(peer[0])
    except ValueError:
        return False
    return any(address in network for network in settings.trusted_networks())


def _configured(value: str) -> frozenset[str]:
    return frozenset(unicodedata.normalize("NFC", name) for name in names(value))


def _proxy_roles(settings: AdmissionSettings, user: str, groups: frozenset[str]) -> frozenset[str]:
    roles = set()
    if groups & names(settings.console_act_groups) or user in _configured(
        settings.console_act_users
    ):
        roles.add(ACT)
    readers = names(settings.console_read_groups)
    if not readers or groups & readers or roles:
        roles.add(READ)
    return frozenset(roles)


def _proxy_principal(request: web.Request, settings: AdmissionSettings) -> Principal | None:
    header = settings.console_proxy_user_header
    if header is None or header not in request.headers:
        return None
    if not _from_trusted_proxy(request, settings):
        # Anyone can send the header; only the proxy's connections may assert it.
        event(log, logging.WARNING, "console identity header from an untrusted peer ignored")
        return None
    asserted = request.headers.getall(header)
    user = proxy_identity(asserted[0]) if len(asserted) == 1 else None
    if user is None:
        event(log, logging.WARNING, "console identity refused: not one plain NFC name")
        return REFUSED
    groups = names(request.headers.get(settings.console_proxy_groups_header, ""))
    roles = _proxy_roles(settings, user, groups)
    actor = proxy_actor(request.app[CSRF_KEY], user)
    return Principal(actor, roles, "proxy", f"proxy:{user}")


# -- the sign-in limit --------------------------------------------------------------------
def sign_in_client(request: web.Request, settings: AdmissionSettings) -> str:
    """Whose attempts these are: on the trusted proxy's connection, the address it appended
    to X-Forwarded-For; on anyone else's, the peer (a header they wrote names nobody)."""
    hops = 1 if _from_trusted_proxy(request, settings) else 0
    return request_client(request, hops)


# -- sessions ------------------------------------------------------------------------------
async def open_session(app: web.Application, name: str) -> tuple[str, Principal]:
    """A new session for a token sign-in; returns (cookie value, principal)."""
    settings = app[SETTINGS]
    session_id = secrets.token_urlsafe(32)
    digest = _session_hash(session_id)
    actor = f"console:{actor_name(name)}"
    ttl_ms = settings.console_session_ms
    key = console_session(digest)
    client = app[REDIS]
    await client.hset(
        key,
        mapping={
            "actor": actor,
            "roles": settings.console_token_role,
            "expires_at": clock.now_ms() + ttl_ms,
        },
    )
    await client.pexpire(key, ttl_ms)
    principal = Principal(
        actor, frozenset({settings.console_token_role}), "session", f"session:{digest}", session_id
    )
    return session_id, principal


async def _session_principal(request: web.Request) -> Principal | None:
    session_id = request.cookies.get(COOKIE, "")
    if not session_id or len(session_id) > 128:
        return None
    digest = _session_hash(session_id)
    raw = await request.app[REDIS].hgetall(console_session(digest))
    if not raw or int(raw.get("expires_at") or 0) <= clock.now_ms():
        return None
    roles = names(str(raw.get("roles", "")))
    return Principal(str(raw["actor"]), roles, "session", f"session:{digest}", session_id)


async def end_session(request: web.Request, principal: Principal) -> None:
    if principal.session:
        await request.app[REDIS].delete(console_session(_session_hash(principal.session)))


def set_cookie(response: web.StreamResponse, settings: AdmissionSettings, session_id: str) -> None:
    response.set_cookie(
        COOKIE,
        session_id,
        max_age=settings.console_session_seconds,
        path=COOKIE_PATH,
        httponly=True,
        samesite="Strict",
        secure=settings.console_cookie_secure,
    )


def clear_cookie(response: web.StreamResponse, settings: AdmissionSettings) -> None:
    response.del_cookie(
        COOKIE,
        path=COOKIE_PATH,
        secure=settings.console_cookie_secure,
        httponly=True,
        samesite="Strict",
    )


async def identify(request: web.Request) -> Principal | None:
    """The proxy's user when the proxy vouches for one, else the session's, else None."""
    settings = request.app[SETTINGS]
    return _proxy_principal(request, settings) or await _session_principal(request)


def cross_site(request: web.Request) -> bool:
    """A browser says where a request came from; anything but our own pages is refused."""
    site = request.headers.get("Sec-Fetch-Site")
    return site is not None and site != "same-origin"


def check_csrf(request: web.Request, principal: Principal, offered: str) -> bool:
    return not cross_site(request) and csrf_valid(request.app[CSRF_KEY], principal, offered)

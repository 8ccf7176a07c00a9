"""What the console's handlers share, as typed keys (the console is its own application)."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from services.admission.ratelimit import IpLimiter
from services.admission.settings import AdmissionSettings
from shared.archive import Evidence
from shared.directory import Directory
from shared.redis import RedisClient

SETTINGS: web.AppKey[AdmissionSettings] = web.AppKey("console_settings", AdmissionSettings)
REDIS: web.AppKey[RedisClient] = web.AppKey("console_redis")
CSRF_KEY: web.AppKey[bytes] = web.AppKey("console_csrf_key", bytes)
SIGN_IN_LIMITER: web.AppKey[IpLimiter] = web.AppKey("console_sign_in_limiter", IpLimiter)
# Operations read where they live: Redis, then the archive (when one is configured).
EVIDENCE: web.AppKey[Evidence] = web.AppKey("console_evidence", Evidence)
# The account directory admission asks (the studio's, or the Redis stand-in): login -> account.
DIRECTORY: web.AppKey[Directory] = web.AppKey("console_directory")

READ = "read"
ACT = "act"


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is using the console: a name for the audit record, roles, and what a form's CSRF
    token is bound to (the session, or the proxy's user)."""

    actor: str
    roles: frozenset[str]
    via: str  # "proxy" | "session"
    binding: str
    session: str = ""  # the cookie's session id (session sign-ins only)
    refusal: str = ""  # why a proxy's identity was refused (it then has no role)

    @property
    def can_act(self) -> bool:
        return ACT in self.roles

    @property
    def can_read(self) -> bool:
        return READ in self.roles or self.can_act


PRINCIPAL: web.RequestKey[Principal] = web.RequestKey("console_principal", Principal)

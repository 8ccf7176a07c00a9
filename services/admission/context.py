"""Everything the handlers share, as typed application keys (one module, one place to look)."""

from __future__ import annotations

from aiohttp import web

from services.admission.budget import PublicBudget
from services.admission.gate import Gate
from services.admission.ratelimit import IpLimiter
from services.admission.settings import AdmissionSettings
from shared.archive import Evidence
from shared.directory import Directory
from shared.redis import RedisClient
from shared.tokens import TokenKeys

SETTINGS: web.AppKey[AdmissionSettings] = web.AppKey("settings", AdmissionSettings)
REDIS: web.AppKey[RedisClient] = web.AppKey("redis")
DIRECTORY: web.AppKey[Directory] = web.AppKey("directory")
GATE: web.AppKey[Gate] = web.AppKey("gate", Gate)
BUDGET: web.AppKey[PublicBudget] = web.AppKey("budget", PublicBudget)
LIMITER: web.AppKey[IpLimiter] = web.AppKey("limiter", IpLimiter)
TOKEN_KEYS: web.AppKey[TokenKeys] = web.AppKey("token_keys", TokenKeys)
OPENAPI: web.AppKey[bytes] = web.AppKey("openapi", bytes)
# Operations read where they live: Redis, then the archive (when one is configured).
EVIDENCE: web.AppKey[Evidence] = web.AppKey("evidence", Evidence)

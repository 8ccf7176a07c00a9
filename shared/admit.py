"""Admission through admit.lua: every entry point converges here, atomically, per account.

Used by the admission service (public and internal API) and by the router (contact forms),
so a contact form can never become a second, hidden send button.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from shared import clock, ids, tracing
from shared.keys import partition_of
from shared.redis import RedisClient
from shared.scripts.admission import Admit, AdmitResult
from shared.settings import PolicySettings
from shared.tokens import TokenKeys

_MAX_TRIES = 4
TRACER = tracing.tracer(__name__)


@dataclass(frozen=True, slots=True)
class Admission:
    result: AdmitResult
    operation_id: str  # "" only for a cooldown whose operation has been forgotten
    state: str
    partition: int

    @property
    def created(self) -> bool:
        return self.result is AdmitResult.CREATED


class AdmissionConflict(RuntimeError):
    """The account's live operation kept changing under us; the caller may retry."""


def horizon(created_ms: int, settings: PolicySettings) -> tuple[int, int]:
    """(token expiry, delivery horizon): never deliver a dead link.

    A key's retention does not bound retries: a refused attempt (429, 5xx) was never
    accepted, and an ambiguous one is replayed only while the provider still holds its
    key or after a trustworthy lookup (services/poller/ambiguity.py)."""
    expires = created_ms + settings.token_ttl_ms
    return expires, expires - settings.horizon_margin_ms


class Admitter:
    def __init__(
        self,
        client: RedisClient,
        settings: PolicySettings,
        keys: TokenKeys,
        template_revision: str = "v1",
    ) -> None:
        self.client = client
        self.settings = settings
        self.keys = keys
        self.template_revision = template_revision

    async def admit(
        self,
        account_id: str,
        entry_point: str,
        actor: str = "",
        *,
        dry: bool = False,
        expected: str = "",
    ) -> Admission:
        """Converge on the live operation, converge inside the cooldown, or create one.

        ``expected``: the account's live (else last) operation id if the caller already read
        it; a right guess saves the "retry" round trip, a wrong one only costs it.
        """
        partition = partition_of(account_id, self.settings.partitions)
        with TRACER.start_as_current_span("admit script") as span:
            span.set_attribute(tracing.PARTITION, partition)
            admission = await self._converge(account_id, entry_point, actor, dry, expected)
            if admission.operation_id:
                span.set_attribute(tracing.OPERATION_ID, admission.operation_id)
            span.set_attribute(tracing.RESULT, str(admission.result))
            return admission

    async def _converge(
        self, account_id: str, entry_point: str, actor: str, dry: bool, expected: str
    ) -> Admission:
        partition = partition_of(account_id, self.settings.partitions)
        traceparent, tracestate = tracing.current()
        for _ in range(_MAX_TRIES):
            now = clock.now_ms()
            new_id = ids.operation_id(partition, now)
            expires, horizon_at = horizon(now, self.settings)
            reply = await Admit(
                partition=partition,
                now=now,
                expected_id=expected,
                new_id=new_id,
                account_id=account_id,
                entry_point=entry_point,
                cooldown_ms=self.settings.cooldown_ms,
                token_kid=self.keys.current_kid,
                token_expires_at=expires,
                horizon_at=horizon_at,
                dry=dry,
                actor=actor[:128],
                provider=self.settings.provider_name,
                template_revision=self.template_revision,
                account_retention_ms=self.settings.retention_ms,
                traceparent=traceparent,
                tracestate=tracestate,
            ).run(self.client)
            if reply.result is not AdmitResult.RETRY:
                return Admission(reply.result, reply.operation_id, reply.state, partition)
            expected = reply.operation_id
        raise AdmissionConflict("the account's operation changed during admission")


def unknown_account_id(login: str) -> str:
    """The stand-in account an unknown login is dry-run against (stable, so it has a node)."""
    digest = hashlib.blake2b(login.encode(), digest_size=12).hexdigest()
    return f"unknown-{digest}"

"""The requests of admission's paths: a request admitted (every entry point converges in
admit.lua), a reset token consumed once, and a client's GCRA limit checked."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from shared.clock import to_seconds
from shared.keys import PartitionKeys
from shared.scripts import Request, Script, unsent


class AdmitResult(StrEnum):
    """admit.lua's reply codes."""

    CREATED = "created"
    CONVERGED = "converged"
    COOLDOWN = "cooldown"
    RETRY = "retry"  # the account's last operation is another one: call again expecting it


@dataclass(frozen=True, slots=True)
class AdmitReply:
    result: AdmitResult
    operation_id: str
    state: str


@dataclass(slots=True, kw_only=True)
class Admit(Request[AdmitReply]):
    SCRIPT = Script("admit")
    CODES = AdmitResult
    KEYS = ("account", "expected_operation", "new_operation", "send", "live")

    partition: int = unsent()  # the account's (shared.keys.partition_of)
    now: int
    expected_id: str
    new_id: str
    account_id: str
    entry_point: str
    cooldown_ms: int
    token_kid: str
    token_expires_at: int
    horizon_at: int
    dry: bool
    actor: str
    provider: str
    template_revision: str
    account_retention_ms: int
    traceparent: str = ""
    tracestate: str = ""

    def keys(self) -> list[str]:
        pk, expected = PartitionKeys(self.partition), self.expected_id or self.new_id
        return [
            pk.account(self.account_id),
            pk.operation(expected),
            pk.operation(self.new_id),
            pk.send,
            pk.live,
        ]

    def decode(self, raw: Any) -> AdmitReply:
        result, operation_id, state = raw
        return AdmitReply(AdmitResult(result), str(operation_id), str(state))


class ConsumeResult(StrEnum):
    """consume_token.lua's replies, plus the checks made before it runs (INVALID)."""

    CONSUMED = "consumed"
    USED = "used"
    EXPIRED = "expired"
    SUPERSEDED = "superseded"
    MISSING = "missing"
    INVALID = "invalid"  # the token does not match the operation (wrong, or another op's)


@dataclass(slots=True, kw_only=True)
class ConsumeToken(Request[ConsumeResult]):
    SCRIPT = Script("consume_token")
    CODES = ConsumeResult
    KEYS = ("operation", "account", "live")

    account_id: str = unsent()
    now: int
    operation_id: str

    def decode(self, raw: Any) -> ConsumeResult:
        return ConsumeResult(raw[0])


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    retry_after_seconds: int


ALLOWED = Decision(True, 0)


@dataclass(slots=True, kw_only=True)
class Gcra(Request[Decision]):
    SCRIPT = Script("gcra")
    KEYS = ("limit",)

    address: str = unsent()  # the client's (services/admission/ratelimit.bucket)
    # whose limit: shared.keys.ip_limit (the public endpoint's), console_sign_in_limit, ...
    scope: Callable[[str], str] = unsent()
    interval_ms: float
    burst: int

    def keys(self) -> list[str]:
        return [self.scope(self.address)]

    def decode(self, raw: Any) -> Decision:
        allowed, wait_ms = raw
        if allowed:
            return ALLOWED
        return Decision(False, max(1, math.ceil(to_seconds(int(wait_ms)))))

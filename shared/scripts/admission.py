"""The requests of admission's paths: a request admitted (every entry point converges in
admit.lua), a reset token consumed once, and a client's GCRA limit checked."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import InitVar, dataclass
from enum import StrEnum
from typing import Any

from shared.keys import PartitionKeys
from shared.scripts import Request, Script, key


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

    account: str = key()
    expected_operation: str = key()
    new_operation: str = key()
    send: str = key()
    live: str = key()
    partition: InitVar[int]  # the account's (shared.keys.partition_of)
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

    def __post_init__(self, partition: int) -> None:
        pk = PartitionKeys(partition)
        self.account = pk.account(self.account_id)
        self.expected_operation = pk.operation(self.expected_id or self.new_id)
        self.new_operation, self.send, self.live = pk.operation(self.new_id), pk.send, pk.live

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

    operation: str = key()
    account: str = key()
    live: str = key()
    account_id: InitVar[str]
    now: int
    operation_id: str

    def __post_init__(self, account_id: str) -> None:
        pk = PartitionKeys.of(self.operation_id)
        self.operation, self.account = pk.operation(self.operation_id), pk.account(account_id)
        self.live = pk.live

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

    limit: str = key()
    address: InitVar[str]  # the client's (services/admission/ratelimit.bucket)
    # whose limit: shared.keys.ip_limit (the public endpoint's), console_sign_in_limit, ...
    scope: InitVar[Callable[[str], str]]
    interval_ms: float
    burst: int

    def __post_init__(self, address: str, scope: Callable[[str], str]) -> None:
        self.limit = scope(address)

    def decode(self, raw: Any) -> Decision:
        allowed, wait_ms = raw
        if allowed:
            return ALLOWED
        return Decision(False, max(1, math.ceil(int(wait_ms) / 1000)))

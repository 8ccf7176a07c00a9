"""Consuming a reset token: the constant-time check here, the single use in consume_token.lua."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from shared import clock
from shared.keys import PartitionKeys
from shared.queries import operation_partition
from shared.redis import RedisClient
from shared.scripts import Request, Script, key
from shared.tokens import TokenKeys


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
    now: int
    operation_id: str

    def decode(self, raw: Any) -> ConsumeResult:
        return ConsumeResult(raw[0])


async def consume(
    client: RedisClient, keys: TokenKeys, partitions: int, operation_id: str, token: str
) -> tuple[ConsumeResult, str]:
    """(result, account id); the account id is "" unless the operation exists."""
    partition = operation_partition(operation_id, partitions)
    if partition is None:
        return ConsumeResult.MISSING, ""
    pk = PartitionKeys(partition)
    account_id, kid = await client.hmget(pk.operation(operation_id), ["account_id", "token_kid"])
    if not account_id:
        return ConsumeResult.MISSING, ""
    # Verified with the key id the operation was created under: rotation keeps old links valid.
    if not keys.verify(operation_id, str(kid or ""), token):
        return ConsumeResult.INVALID, str(account_id)
    result = await ConsumeToken(
        operation=pk.operation(operation_id), account=pk.account(str(account_id)), live=pk.live,
        now=clock.now_ms(), operation_id=operation_id,
    ).run(client)  # fmt: skip
    return result, str(account_id)

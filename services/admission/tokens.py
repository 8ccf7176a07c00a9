"""Consuming a reset token: the constant-time check here, the single use in consume_token.lua."""

from __future__ import annotations

from enum import StrEnum

from shared import clock
from shared.keys import PartitionKeys
from shared.queries import operation_partition
from shared.redis import RedisClient
from shared.scripts import Script
from shared.tokens import TokenKeys

_consume = Script("consume_token")


class ConsumeResult(StrEnum):
    """consume_token.lua's replies, plus the checks made before it runs."""

    CONSUMED = "consumed"
    USED = "used"
    EXPIRED = "expired"
    SUPERSEDED = "superseded"
    MISSING = "missing"
    INVALID = "invalid"  # the token does not match the operation (wrong, or another op's)


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
    (result,) = await _consume(
        client,
        [pk.operation(operation_id), pk.account(str(account_id)), pk.live],
        [clock.now_ms(), operation_id],
    )
    return ConsumeResult(result), str(account_id)

"""Consuming a reset token: the constant-time check here, the single use in consume_token.lua."""

from __future__ import annotations

from shared import clock
from shared.keys import PartitionKeys
from shared.operation_views import operation_partition
from shared.redis import RedisClient
from shared.scripts.admission import ConsumeResult, ConsumeToken
from shared.tokens import TokenKeys


async def _verified(
    client: RedisClient, keys: TokenKeys, partitions: int, operation_id: str, token: str
) -> tuple[ConsumeResult | None, PartitionKeys | None, str]:
    """(refusal or None, the partition's keys, account id) once the token is checked."""
    partition = operation_partition(operation_id, partitions)
    if partition is None:
        return ConsumeResult.MISSING, None, ""
    pk = PartitionKeys(partition)
    account_id, kid = await client.hmget(pk.operation(operation_id), ["account_id", "token_kid"])
    if not account_id:
        return ConsumeResult.MISSING, None, ""
    # Verified with the key id the operation was created under: rotation keeps old links valid.
    if not keys.verify(operation_id, str(kid or ""), token):
        return ConsumeResult.INVALID, None, str(account_id)
    return None, pk, str(account_id)


async def refusal(
    client: RedisClient, keys: TokenKeys, partitions: int, operation_id: str, token: str
) -> ConsumeResult | None:
    """What consuming this token now would answer if it refused (None: it would work), read
    without consuming: the local reset page says a used link is used before the form."""
    refused, pk, account_id = await _verified(client, keys, partitions, operation_id, token)
    if refused is not None or pk is None:
        return refused
    fields = ["token_consumed_at", "token_expires_at"]
    consumed_at, expires_at = (
        int(v or 0) for v in await client.hmget(pk.operation(operation_id), fields)
    )
    if consumed_at > 0:
        return ConsumeResult.USED
    if expires_at <= clock.now_ms():
        return ConsumeResult.EXPIRED
    last = await client.hget(pk.account(account_id), "last")
    return ConsumeResult.SUPERSEDED if last and str(last) != operation_id else None


async def consume(
    client: RedisClient, keys: TokenKeys, partitions: int, operation_id: str, token: str
) -> tuple[ConsumeResult, str]:
    """(result, account id); the account id is "" unless the operation exists."""
    refused, pk, account_id = await _verified(client, keys, partitions, operation_id, token)
    if refused is not None or pk is None:
        return refused or ConsumeResult.MISSING, account_id
    request = ConsumeToken(account_id=account_id, now=clock.now_ms(), operation_id=operation_id)
    result = await request.run(client)
    return result, str(account_id)

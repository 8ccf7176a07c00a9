"""A malformed operation id is a 404 at the edge (issue 10, item 7), on a real admission.

Found by attack: ``GET /internal/v1/recovery-operations/op-1-<ulid>:attempts`` named the
operation's attempt ledger (a list), reached Redis as a hash read and answered ``503
store_unavailable`` with a WRONGTYPE warning in the log. docs/api.md says 404.
"""

from __future__ import annotations

import aiohttp
from redis.asyncio import Redis

from shared.ids import operation_id
from shared.keys import PartitionKeys
from tests.security.conftest import BEARER
from tests.support.processes import Processes


async def test_an_id_of_another_shape_is_404_and_never_reaches_redis(
    stack: Processes, redis: Redis
) -> None:
    admission = await stack.start("admission")
    real = operation_id(1)
    await redis.rpush(PartitionKeys(1).attempts(real), "{}")  # the ledger: a list
    async with aiohttp.ClientSession() as session:
        for bad in (f"{real}:attempts", f"{real}x", "op-1-" + "a" * 26, "op-99999-" + real[5:]):
            url = f"{admission.url}/internal/v1/recovery-operations/{bad}"
            async with session.get(url, headers=BEARER) as reply:
                assert reply.status == 404, (bad, reply.status)
                assert (await reply.json())["error"] == "unknown_operation"
    assert not [r for r in admission.log_records() if r.get("msg") == "dependency unavailable"]

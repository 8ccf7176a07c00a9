"""Writing a support case exactly once per contact-form event id.

The seen record (``rg:router:seen:<event_id>``) and the case stream are different keys
(different slots on Cluster), so they cannot change in one transaction. Order instead:
claim the event id (route_claim.lua, with the case id to use) -> check the claim is still
ours -> XADD the case -> mark the claim written -> XACK. A redelivery finds the claim:
written -> ack only; claimed by a router that died -> look for its case in the stream from
the claim's time on, and write it (with the same case id) only if it is not there. So a
redelivered event never makes a second case, and a crash between claim and case does not
lose one.
"""

from __future__ import annotations

from contextlib import aclosing

from shared.keys import SUPPORT_CASES, router_seen
from shared.operation_views import scan_cases
from shared.redis import RedisClient


async def still_claimed(client: RedisClient, event_id: str, claimed_at: int) -> bool:
    """Whether the claim made at ``claimed_at`` is still the event's, its case unwritten.

    Asked just before the case is written: a claim older than the stale limit may be taken
    over by another router while this one is still routing (route_claim.lua), and then only
    the router holding the newer claim may write. What is left is the one round trip
    between this read and the write, not the whole routing."""
    status, at = await client.hmget(router_seen(event_id), ["status", "claimed_at"])
    return status == "claimed" and at is not None and int(float(at)) == claimed_at


async def mark_written(client: RedisClient, event_id: str, entry_id: str, ttl_ms: int) -> None:
    """The case is in the stream: from now on a redelivery only acks."""
    key = router_seen(event_id)
    async with client.pipeline(transaction=True) as pipe:  # one key: fine on Cluster
        pipe.hset(key, mapping={"status": "written", "case_entry": entry_id})
        pipe.pexpire(key, ttl_ms)
        await pipe.execute()


async def write_case(client: RedisClient, fields: dict[str, str], maxlen: int) -> str:
    return str(await client.xadd(SUPPORT_CASES, fields, maxlen=maxlen, approximate=True))  # type: ignore[arg-type]


async def find_case(client: RedisClient, case_id: str, since_ms: int) -> str | None:
    """The stream entry of ``case_id`` written at or after ``since_ms`` (minus skew)."""
    async with aclosing(scan_cases(client, since_ms)) as entries:
        async for entry_id, fields in entries:
            if fields.get("case_id") == case_id:
                return entry_id
    return None

"""Writing a support case exactly once per contact-form event id.

The seen record (``rg:router:seen:<event_id>``) and the case stream are different keys
(different slots on Cluster), so they cannot change in one transaction. Order instead:
claim the event id (route_claim.lua, with the case id to use) -> XADD the case -> mark the
claim written -> XACK. A redelivery finds the claim: written -> ack only; claimed by a
router that died -> look for its case in the stream from the claim's time on, and write
it (with the same case id) only if it is not there. So a redelivered event never makes a
second case, and a crash between claim and case does not lose one.
"""

from __future__ import annotations

from contextlib import aclosing
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from shared.keys import ROUTER_SEEN_PREFIX, SUPPORT_CASES
from shared.queries import scan_cases
from shared.redis import RedisClient
from shared.scripts import Request, Script, key


class ClaimCode(StrEnum):
    NEW = "new"
    DONE = "done"
    BUSY = "busy"
    TAKEOVER = "takeover"


@dataclass(frozen=True, slots=True)
class Claim:
    code: ClaimCode
    case_id: str
    claimed_at: int


@dataclass(slots=True, kw_only=True)
class RouteClaim(Request[Claim]):
    SCRIPT = Script("route_claim")
    CODES = ClaimCode

    seen: str = key()
    case_id: str
    now: int
    ttl_ms: int
    stale_ms: int

    def decode(self, raw: Any) -> Claim:
        return Claim(ClaimCode(raw[0]), str(raw[1]), int(raw[2]))


def seen_key(event_id: str) -> str:
    return ROUTER_SEEN_PREFIX + event_id


async def claim(
    client: RedisClient, event_id: str, case_id: str, *, now: int, ttl_ms: int, stale_ms: int
) -> Claim:
    return await RouteClaim(
        seen=seen_key(event_id), case_id=case_id, now=now, ttl_ms=ttl_ms, stale_ms=stale_ms
    ).run(client)


async def mark_written(client: RedisClient, event_id: str, entry_id: str, ttl_ms: int) -> None:
    """The case is in the stream: from now on a redelivery only acks."""
    key = seen_key(event_id)
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

"""The per-client-IP abuse limit (GCRA in Redis) and WAIT for replicas."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.asyncio import Redis

from services.admission.ratelimit import bucket, client_address
from services.ctl.embedded import RedisServer
from shared.directory import Account, RedisDirectory
from shared.keys import PartitionKeys, partition_of
from tests.admission.helpers import ALICE, admission_settings, public, seed_directory, serving


class CountingDirectory(RedisDirectory):
    """The real Redis directory, counting lookups (to prove the limit answers first)."""

    lookups = 0

    async def lookup_login(self, login: str) -> Account | None:
        self.lookups += 1
        return await super().lookup_login(login)


async def test_the_ip_limit_answers_429_before_any_lookup_and_reveals_nothing(
    redis: Redis, redis_server: Any
) -> None:
    await seed_directory(redis)
    settings = admission_settings(redis_server.url, ip_limit_per_minute=6, ip_limit_burst=2)
    directory = CountingDirectory(redis)
    async with serving(settings, directory=directory) as http:
        allowed = [await public(http, "nobody@example.com") for _ in range(2)]
        limited = [await public(http, login) for login in (ALICE[0], "nobody@example.com", "x")]
        assert [r.status for r in allowed] == [202, 202]
        assert {r.status for r in limited} == {429}
        bodies = {await r.read() for r in limited}
        assert len(bodies) == 1  # known or unknown login: the same answer
        assert {r.headers["Retry-After"] for r in limited} == {"10"}  # 60 s / 6 per minute
        assert directory.lookups == 2
        pk = PartitionKeys(partition_of(ALICE[1].account_id, 4))
        assert await redis.xlen(pk.send) == 0


async def test_each_forwarded_client_has_its_own_budget_behind_a_trusted_proxy(
    redis: Redis, redis_server: Any
) -> None:
    # One token a minute, so no refill can come between the first and the spoofed request.
    settings = admission_settings(
        redis_server.url, ip_limit_per_minute=1, ip_limit_burst=1, trusted_proxy_hops=1
    )
    async with serving(settings) as http:
        # A client cannot pick its bucket: only the entry our proxy appended counts.
        first = await public(http, "a", **{"X-Forwarded-For": "1.1.1.1, 203.0.113.7"})
        spoofed = await public(http, "a", **{"X-Forwarded-For": "9.9.9.9, 203.0.113.7"})
        other = await public(http, "a", **{"X-Forwarded-For": "203.0.113.8"})
    assert (first.status, spoofed.status, other.status) == (202, 429, 202)


def test_client_address_rules() -> None:
    assert client_address("10.0.0.1", "1.2.3.4", 0) == "10.0.0.1"
    assert client_address("10.0.0.1", "1.2.3.4, 5.6.7.8", 1) == "5.6.7.8"
    assert client_address("10.0.0.1", "1.2.3.4, 5.6.7.8", 2) == "1.2.3.4"
    assert client_address("10.0.0.1", "5.6.7.8", 3) == "5.6.7.8"
    assert client_address("10.0.0.1", None, 1) == "10.0.0.1"
    assert client_address("10.0.0.1", "not-an-ip", 1) == "invalid"
    assert bucket("2001:db8::1") == bucket("2001:db8::ffff") == "2001:db8::/64"
    assert bucket("::ffff:192.0.2.1") == "192.0.2.1"


def _reference_bucket(address: str) -> str:
    """The rule spelled with ipaddress only (bucket() takes a faster path for dotted quads)."""
    try:
        ip = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        return "invalid"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


@given(
    st.one_of(
        st.text(alphabet="0123456789.x[] :\n\x00+-\u0663\uff11abcdef", max_size=20),
        st.ip_addresses().map(str),
        st.tuples(*[st.integers(0, 300)] * 4).map(lambda t: ".".join(map(str, t))),
        st.tuples(*[st.integers(0, 255)] * 4).map(lambda t: ".".join(f"{n:02d}" for n in t)),
    )
)
def test_the_fast_ipv4_path_buckets_exactly_like_ipaddress(address: str) -> None:
    assert bucket.__wrapped__(address) == _reference_bucket(address)


@pytest.fixture(scope="module")
def replica_pair() -> Iterator[tuple[RedisServer, RedisServer]]:
    import redis as sync_redis

    primary = RedisServer().start()
    replica = RedisServer().start()
    # No 5 s wait for more replicas before the first (diskless) sync.
    sync_redis.Redis(port=primary.port).config_set("repl-diskless-sync-delay", 0)
    sync_redis.Redis(port=replica.port).replicaof("127.0.0.1", primary.port)
    yield primary, replica
    replica.stop()
    primary.stop()


async def test_wait_for_replicas_acknowledges_when_a_replica_confirms(
    replica_pair: tuple[RedisServer, RedisServer],
) -> None:
    primary, replica = replica_pair
    client = Redis.from_url(primary.url, decode_responses=True)
    await client.flushall()
    await seed_directory(client)
    replica_client = Redis.from_url(replica.url, decode_responses=True)
    for _ in range(200):  # the replica link comes up asynchronously
        if (await replica_client.info("replication"))["master_link_status"] == "up":
            break
        await asyncio.sleep(0.05)
    settings = admission_settings(primary.url, wait_replicas=1, wait_timeout_ms=2000)
    try:
        async with serving(settings) as http:
            assert (await public(http, ALICE[0])).status == 202
            assert (await public(http, "nobody@example.com")).status == 202
        pk = PartitionKeys(partition_of(ALICE[1].account_id, 4))
        assert await replica_client.xlen(pk.send) == 1  # acknowledged means on the replica
    finally:
        await client.aclose()
        await replica_client.aclose()


async def test_too_few_replicas_is_503_and_the_retry_converges(
    redis: Redis, redis_server: Any
) -> None:
    await seed_directory(redis)
    strict = admission_settings(redis_server.url, wait_replicas=1, wait_timeout_ms=50)
    async with serving(strict) as http:
        known = await public(http, ALICE[0])
        unknown = await public(http, "nobody@example.com")
        for reply in (known, unknown):  # the same answer whether the login exists or not
            assert reply.status == 503
            assert reply.headers["Retry-After"] == "1"
            assert (await reply.json())["error"] == "not_replicated"
    async with serving(admission_settings(redis_server.url)) as http:
        assert (await public(http, ALICE[0])).status == 202
    pk = PartitionKeys(partition_of(ALICE[1].account_id, 4))
    assert await redis.xlen(pk.send) == 1
    (op,) = await redis.zrange(pk.live, 0, -1)
    assert (await redis.hget(pk.operation(op), "ep:public")) == "2"

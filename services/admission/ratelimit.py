"""The per-client-IP abuse limit on the public endpoint: GCRA in Redis (shared/scripts/gcra.lua).

The client is the TCP peer unless ``trusted_proxy_hops`` proxies sit in front of us; then it
is the address the outermost trusted proxy appended to X-Forwarded-For (entries further left
are whatever the client chose to send). IPv6 clients are limited per /64, since one host
usually holds a whole /64.
"""

from __future__ import annotations

import functools
import ipaddress
import socket
from collections.abc import Callable

from aiohttp import web

from shared import keys
from shared.redis import RedisClient
from shared.scripts.admission import ALLOWED, Decision, Gcra


def request_client(request: web.Request, trusted_hops: int) -> str:
    """The address to limit a request by (the public endpoint's and the console's sign-in).
    Every X-Forwarded-For line counts, as one list in order: a proxy may add a line of its
    own instead of appending to the client's (RFC 9110 5.3, RFC 7239 7.1), and reading the
    first line alone would take the client's own words for the proxy's."""
    lines = request.headers.getall("X-Forwarded-For", ())
    return client_address(request.remote, ",".join(lines), trusted_hops)


def client_address(peer: str | None, forwarded_for: str | None, trusted_hops: int) -> str:
    """The address to limit: the peer, or the entry ``trusted_hops`` from the right."""
    candidate = peer or ""
    if trusted_hops > 0 and forwarded_for:
        entries = [e.strip() for e in forwarded_for.split(",") if e.strip()]
        if entries:
            # Fewer entries than hops means a proxy did not append: the leftmost is the best guess.
            candidate = entries[-trusted_hops] if len(entries) >= trusted_hops else entries[0]
    return bucket(candidate)


@functools.lru_cache(maxsize=65536)  # parsing an address costs more than the limit check
def bucket(address: str) -> str:
    candidate = address.strip("[]")
    try:  # a dotted quad, the usual case: libc parses it several times faster than ipaddress
        return socket.inet_ntop(socket.AF_INET, socket.inet_pton(socket.AF_INET, candidate))
    except (OSError, ValueError):
        pass
    try:
        ip = ipaddress.ip_address(candidate)
    except ValueError:
        return "invalid"  # garbage in a header must not mint a fresh bucket per request
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


class IpLimiter:
    """A GCRA limit per client address, its Redis key named by ``key`` (the public
    endpoint's by default; the console's token sign-in has its own)."""

    def __init__(
        self,
        client: RedisClient,
        per_minute: int,
        burst: int,
        key: Callable[[str], str] = keys.ip_limit,
    ) -> None:
        self.client = client
        self.enabled = per_minute > 0
        self.interval_ms = 60_000 / per_minute if per_minute > 0 else 0.0
        self.burst = burst
        self.key = key

    async def check(self, address: str) -> Decision:
        if not self.enabled:
            return ALLOWED
        limit = Gcra(
            address=address, scope=self.key, interval_ms=self.interval_ms, burst=self.burst
        )
        return await limit.run(self.client)

    async def forget(self, address: str) -> None:
        """Drop the address's count, as if it had made no attempt."""
        await self.client.delete(self.key(address))

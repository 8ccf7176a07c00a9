"""A storm's timeline, one row a second: what the provider saw and what the pacer asked for.

``benchmarks/storm.py --timeline`` samples, once a second while the storm runs, the sandbox's
send and 429 counters (the light form of its stats: one made-up operation id, so the
per-operation maps stay out of the answer), the shared pacing hash (the rate last given, the
time of the last cut) and the operations still live. It tells a pacer that holds the rate
low (the rate column is low) from a machine that cannot keep up with it (the rate is at the
provider's, the sends are not).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from redis.asyncio import Redis

from shared.keys import provider_pacing
from tests.support.sandbox import sandbox_stats

STARTUP_S = 5.0  # the start and the discovery of the provider's rate
BURST_429S = 3  # this many 429s in one second are a burst, not a probe
LOSS_KINDS = ("start", "sandbox late", "429 burst", "steady", "tail")
# An id no operation has: the sandbox then answers its counters without the 10,000-entry maps.
_LIGHT = {"operation_id": "storm-timeline"}


@dataclass(frozen=True, slots=True)
class Row:
    t: float  # seconds since the storm began
    sends: int  # send requests the sandbox answered so far (2xx and 429)
    throttled: int  # of them 429s
    rate: float  # the shared pacing rate last given (sends/s)
    cut_age: float  # seconds since the last cut (-1: none yet)
    live: int  # operations not yet terminal
    load: float
    late_ms: float = 0.0  # how late the sandbox's own loop ran so far, in all (stalls.py)


@dataclass
class Timeline:
    client: Redis
    provider_url: str
    provider: str
    route: str  # the sandbox's stats key for sends
    rows: list[Row] = field(default_factory=list)

    async def sample(self, started: float, live: int, load: float) -> None:
        stats = await sandbox_stats(self.provider_url, **_LIGHT)
        fields = await self.client.hmget(provider_pacing(self.provider), "rate", "cut_at")
        now_ms = time.time() * 1000
        cut_at = float(fields[1] or 0)
        self.rows.append(
            Row(
                t=time.monotonic() - started,
                sends=int(stats["requests_by_route"].get(self.route, 0)),
                throttled=int(stats["send_throttled_total"]),
                rate=float(fields[0] or 0),
                cut_age=(now_ms - cut_at) / 1000 if cut_at else -1.0,
                live=live,
                load=load,
                late_ms=float(stats.get("stalled_ms_total", 0)),
            )
        )

    async def run(
        self,
        started: float,
        live: Callable[[], Awaitable[int]],
        load: Callable[[], float],
        stop: asyncio.Event,
    ) -> None:
        """Sample every second until ``stop``."""
        while not stop.is_set():
            await self.sample(started, await live(), load())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)

    def losses(self, rate: float, drain_s: float, startup_s: float = STARTUP_S) -> str:
        """Where the drain lost time against a provider at ``rate``: the sends each second
        fell short of it, summed by what that second was (the first seconds: the start and
        the discovery of the rate; a second the sandbox ran late in; one with a burst of
        429s; the rest), in seconds of the provider's rate; then the tail: from the first
        second with no more than a second's operations live, the drain took this much
        longer than they needed at the rate (the last 429s' operations waiting out their
        Retry-After)."""
        lost = dict.fromkeys(LOSS_KINDS, 0.0)
        previous = Row(0.0, 0, 0, 0.0, -1.0, 0, 0.0)
        for row in self.rows[:-1]:
            if row.live <= rate:
                lost["tail"] = max(0.0, drain_s - row.t - row.live / rate)
                break
            span = row.t - previous.t
            short = max(0.0, rate * span - (row.sends - previous.sends)) / rate
            if row.t <= startup_s:
                kind = "start"
            elif row.late_ms > previous.late_ms:
                kind = "sandbox late"
            elif row.throttled - previous.throttled >= BURST_429S:
                kind = "429 burst"
            else:
                kind = "steady"
            lost[kind] += short
            previous = row
        parts = ", ".join(f"{kind} {seconds:.1f} s" for kind, seconds in lost.items())
        return f"time lost against {rate:g}/s: {parts} (sum {sum(lost.values()):.1f} s)"

    def lines(self) -> list[str]:
        lines = [
            "timeline:   t  sends/s  429s  pacing rate  since cut  live  load  sandbox late ms"
        ]
        previous = Row(0.0, 0, 0, 0.0, -1.0, 0, 0.0)
        for row in self.rows:
            span = max(row.t - previous.t, 1e-3)
            lines.append(
                f"{row.t:>12.1f} {(row.sends - previous.sends) / span:>8.0f} "
                f"{row.throttled - previous.throttled:>5} {row.rate:>12.1f} "
                f"{row.cut_age:>10.1f} {row.live:>5} {row.load:>5.1f} "
                f"{row.late_ms - previous.late_ms:>16.0f}"
            )
            previous = row
        return lines

"""The last hour per provider, drawn small: accepted sends and 429s per minute, and the
oldest eligible operation's share of its delivery horizon, from what the services already
count (the pacer's totals in each provider's pacing hash, the partitions' live indexes).

Each console replica samples every few seconds into a ring of 60 minutes per provider in
Redis (``shared/scripts/chart_sample.lua``: replicas count each send once, and a restart
draws nothing rather than an hour as one minute); the home page draws the ring as inline SVG
(no script, no library: the console works offline and under its CSP), refreshed with the
rest of the page."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from redis.exceptions import RedisError

from services.admission.console import sparkline
from services.admission.console.html import Markup, cell, escape, join, table
from services.admission.console.provider_lines import configured_kinds
from services.admission.settings import AdmissionSettings
from shared import clock, control, operation_views
from shared.keys import provider_minutes
from shared.logging import event
from shared.redis import TRANSIENT_ERRORS, RedisClient
from shared.scripts.charts import ChartSample
from shared.service import sleep_or_stop

log = logging.getLogger("services.admission.console")

SAMPLE_EVERY_SECONDS = 10.0
MINUTE_MS = 60_000
MINUTES = 60  # the ring: the last hour
MAX_GAP_MS = 6 * clock.to_ms(SAMPLE_EVERY_SECONDS)  # longer without a sample: a new baseline
KEEP_MS = 2 * MINUTES * MINUTE_MS


def horizon_share(r: dict[str, Any]) -> float | None:
    """How much of the time from creation to its delivery horizon an operation has spent
    (1.0: the horizon is reached); None without a horizon."""
    span = r["horizon_at"] - r["created_at"]
    return r["age_seconds"] * 1000 / span if span > 0 else None


def percent(share: float | None) -> str:
    """A share as a person reads it: 0.4 %, 37 %; capped at 999 %."""
    if share is None:
        return "-"
    value = min(999.0, 100 * share)
    return f"{value:.1f} %" if value < 10 else f"{value:.0f} %"


# -- sampling -------------------------------------------------------------------------------
async def sample(client: RedisClient, settings: AdmissionSettings, now: int) -> None:
    """One sample of every configured provider."""
    kinds = configured_kinds(settings.provider_name)
    default = next(iter(kinds))
    state = await control.read(client)
    oldest = await operation_views.oldest_per_partition(
        client, settings.partitions, settings.max_attempts, now
    )
    for name in kinds:
        shares = [
            share
            for p, r in enumerate(oldest)
            if r is not None and state.provider_for(p, default) == name
            if (share := horizon_share(r)) is not None
        ]
        per_mille = round(1000 * max(shares)) if shares else -1
        await ChartSample(
            provider=name, now=now, oldest=per_mille, max_gap_ms=MAX_GAP_MS, keep_ms=KEEP_MS
        ).run(client)


async def keep_sampling(
    client: RedisClient, settings: AdmissionSettings, stop: asyncio.Event
) -> None:
    """Sample now and every few seconds until stopped; a failed sample is logged, and the
    next one goes on (a gap in the ring, not a dead loop)."""
    while not stop.is_set():
        try:
            await sample(client, settings, clock.now_ms())
        except (RedisError, *TRANSIENT_ERRORS) as error:
            event(log, logging.WARNING, "chart sample failed", error=type(error).__name__)
        await sleep_or_stop(stop, SAMPLE_EVERY_SECONDS)


# -- reading --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Series:
    """One provider's last hour, a value per minute, oldest first (None: no sample)."""

    accepted: list[int | None]
    throttled: list[int | None]
    oldest: list[float | None]  # share of the horizon (1.0: reached)


def _series(raw: dict[Any, Any], now: int) -> Series:
    current = now // MINUTE_MS
    first = current - MINUTES + 1
    accepted: list[int | None] = []
    throttled: list[int | None] = []
    oldest: list[float | None] = []
    for minute in range(first, current + 1):
        slot = minute % MINUTES
        held = raw.get(f"m{slot}")
        sampled = held is not None and int(held) == minute
        share = raw.get(f"o{slot}") if sampled else None
        accepted.append(int(raw.get(f"a{slot}") or 0) if sampled else None)
        throttled.append(int(raw.get(f"t{slot}") or 0) if sampled else None)
        oldest.append(int(share) / 1000 if share is not None else None)
    return Series(accepted, throttled, oldest)


async def read(client: RedisClient, providers: list[str], now: int) -> dict[str, Series]:
    pipe = client.pipeline(transaction=False)
    for name in providers:
        pipe.hgetall(provider_minutes(name))
    rings = await pipe.execute()
    return {name: _series(raw, now) for name, raw in zip(providers, rings, strict=True)}


# -- drawing --------------------------------------------------------------------------------
def _counted(values: list[int | None], what: str) -> str:
    seen = [v for v in values if v is not None]
    if not seen:
        return "no sample yet"
    latest = values[-1] if values[-1] is not None else "-"
    return f"{sum(seen)} {what} in the last hour, {latest} this minute"


def _shares(values: list[float | None]) -> str:
    seen = [v for v in values if v is not None]
    if not seen:
        return "no eligible operation in the last hour"
    now = percent(values[-1]) if values[-1] is not None else "none eligible"
    return f"now {now} of its horizon, at most {percent(max(seen))}"


def _chart(svg: Markup, figures: str) -> Markup:
    return Markup(f'{svg}<br><span class="hint">{escape(figures)}</span>')


def _row(name: str, series: Series) -> Markup:
    accepted = _counted(series.accepted, "accepted")
    throttled = _counted(series.throttled, "429s")
    oldest = _shares(series.oldest)
    cells = (
        name,
        _chart(
            sparkline.bars(
                series.accepted,
                f"{name}: sends accepted per minute, last hour: {accepted}",
                "accepted",
            ),
            accepted,
        ),
        _chart(
            sparkline.bars(
                series.throttled, f"{name}: 429s per minute, last hour: {throttled}", "throttled"
            ),
            throttled,
        ),
        _chart(
            sparkline.against_limit(
                series.oldest,
                f"{name}: oldest eligible operation "
                f"against its delivery horizon, last hour: {oldest}",
                "oldest",
            ),
            oldest,
        ),
    )
    return Markup(f'<tr data-chart="{escape(name)}">{join(cell(c) for c in cells)}</tr>')


COLUMNS = (
    "Provider",
    "Sends accepted per minute",
    "429s per minute",
    "Oldest eligible against its horizon (dashed: the horizon)",
)
CAPTION = (
    "The last hour, a value per minute, oldest at the left; sampled every "
    f"{SAMPLE_EVERY_SECONDS:.0f} s from the pacer's counts and the partitions' oldest "
    "eligible operation (a faint mark: no sample that minute)."
)


def charts_table(series: dict[str, Series]) -> Markup:
    return table(COLUMNS, [_row(name, s) for name, s in series.items()], CAPTION)

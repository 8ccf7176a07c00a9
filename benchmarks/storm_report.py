"""Scenarios of the storm benchmark and how a run is reported (see benchmarks/storm.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from benchmarks import figures
from benchmarks import storm_audit as audit
from services.sandbox.stalls import STALL_SECONDS
from shared.settings import ProviderSettings

# 8 in flight per admission replica keep its one core busy; 64 (32 each) made requests wait
# past the Redis deadline (5 s) on a loaded machine and admission answered 503.
ADMISSION_CLIENTS = 16
SANDBOX_SEED = 7  # the drop scenario drops the same sends on every run
# How long the provider keeps an idempotency key: the project's default unless --key-retention.
KEY_RETENTION = int(ProviderSettings.model_fields["idempotency_window_seconds"].default)


@dataclass(frozen=True)
class Scenario:
    name: str
    what: str
    ceiling_share: float  # RESETGATE_PROVIDER_MAX_RATE / the provider's (peak) rate
    schedule: str = ""  # sandbox rate schedule "rate:seconds,...,rate"
    drop: float = 0.0  # sandbox: accept the send, then drop the connection
    restart: bool = False  # SIGTERM and start again each sender, one by one
    rate: float = 0.0  # the provider's rate for this scenario (0: --rate)
    burst: int = 0  # the provider's burst (0: the sandbox's default)
    blackout: float = 0.0  # seconds of 429 to every send, no wait stated, from the first
    quota_window: float = 0.0  # SES: RESETGATE_QUOTA_WINDOW_SECONDS (the daily quota's window)


SCENARIOS = {
    s.name: s
    for s in (
        Scenario("ceiling-1.5", "ceiling 1.5 x the provider's real rate", 1.5),
        Scenario("ceiling-1.0", "ceiling = the provider's real rate", 1.0),
        Scenario(
            "schedule",
            "provider rate 100 -> 50 -> 100 /s, ceiling 1.5 x 100",
            1.5,
            schedule="100:20,50:20,100",
        ),
        Scenario("restart", "senders restarted one by one during the storm", 1.0, restart=True),
        Scenario("drop", "2% of sends accepted, then the connection dropped", 1.0, drop=0.02),
        # A ceiling share of 0 leaves RESETGATE_PROVIDER_MAX_RATE at its default (50/s).
        Scenario(
            "slow-1",
            "1 send/s, burst 1 (a new SES account), default ceiling",
            0.0,
            rate=1.0,
            burst=1,
        ),
        Scenario("slow-0.2", "0.2 send/s, burst 1, default ceiling", 0.0, rate=0.2, burst=1),
        Scenario(
            "blackout",
            "429 without a wait to every send for 600 s, then 10/s",
            0.0,
            rate=10.0,
            blackout=600.0,
        ),
        Scenario(
            "incident",
            "429 without a wait to every send for S s (--outage, 90), then 20/s",
            0.0,
            rate=20.0,
            blackout=90.0,
        ),
        Scenario(
            "quota",
            "SES on moto: 1/s and a daily quota (200) below N, its window shortened to 300 s",
            0.0,
            quota_window=300.0,
        ),
    )
}


def quota_ideal(n: int, rate: float, quota: int, window: float) -> float:
    """A quota below N: the first ``quota`` at the rate, the rest once the window rolls."""
    return n / rate if n <= quota else window + (n - quota) / rate


def parse_schedule(text: str) -> list[tuple[float, float]]:
    """ "100:20,50:20,100" -> [(100, 20), (50, 20), (100, inf)] (sends/s, seconds)."""
    phases = []
    for part in text.split(","):
        rate, _, seconds = part.partition(":")
        phases.append((float(rate), float(seconds) if seconds else math.inf))
    return phases


def ideal_seconds(n: int, rate: float, schedule: str, blackout: float = 0.0) -> float:
    """N / R, or the time the schedule needs to allow N sends (after any blackout)."""
    if not schedule:
        return blackout + n / rate
    left, elapsed = float(n), 0.0
    for phase_rate, seconds in parse_schedule(schedule):
        if left <= phase_rate * seconds:
            return elapsed + left / phase_rate
        left -= phase_rate * seconds
        elapsed += seconds
    raise ValueError("the last phase of a schedule must be open-ended")


@dataclass
class Run:
    scenario: Scenario
    n: int
    rate: float
    senders: int
    admissions: int = 2
    provider: str = "http"  # RESETGATE_PROVIDER_KIND and the sandbox's mode
    admit_ahead: bool = False  # admit the N before the senders start (a backlog)
    key_retention: int = KEY_RETENTION  # seconds, the sandbox's and the services' one value
    search_delay: float = 0.0  # Postmark mode: seconds before a send appears in its search
    settings: dict[str, str] = field(default_factory=dict)  # the non-default ones
    admitted_s: float = 0.0
    drain_s: float = math.nan
    ideal_s: float = 0.0
    sends: int = 0
    throttled: int = 0
    throttled_after_stall: int = 0  # of them, answered while the sandbox itself ran late
    outage_throttled: int = -1  # of them, answered during the blackout (-1: none, or unread)
    # its loop's stalls, the longest and all of them together (ms)
    sandbox_stalls: tuple[int, float, float] = (0, 0.0, 0.0)
    dropped: int = 0  # sends the sandbox accepted, then dropped the connection of
    sandbox_duplicates: int = 0
    sandbox_lost: int = 0
    store: audit.StoreCounts = field(default_factory=audit.StoreCounts)
    cpu_s: float = 0.0
    emails: int = 0
    accepted_memory: audit.Memory = field(default_factory=audit.Memory)
    queued_memory: audit.Memory = field(default_factory=audit.Memory)
    notes: list[str] = field(default_factory=list)
    load: tuple[float, float] = (0.0, 0.0)  # the machine's 1-minute load average, start/end
    timeline: list[str] = field(default_factory=list)  # --timeline: a row a second
    profile: list[str] = field(default_factory=list)  # --profile: where the senders' CPU went

    @property
    def ratio(self) -> float:
        return self.drain_s / self.ideal_s

    @property
    def cpu_per_1000(self) -> float:
        return 1000 * self.cpu_s / max(1, self.emails)


def sandbox_overrides(
    scenario: Scenario, rate: float, key_retention: int = KEY_RETENTION
) -> dict[str, Any]:
    overrides: dict[str, Any] = {"seed": SANDBOX_SEED}
    if key_retention != KEY_RETENTION:  # the services get the same value (storm.py)
        overrides["idempotency_window_seconds"] = key_retention
    if scenario.schedule:  # the schedule replaces the one rate
        overrides["send_rate_schedule"] = scenario.schedule
    else:
        overrides["send_rate_per_second"] = rate
    if scenario.drop:
        overrides["drop_probability"] = scenario.drop
    if scenario.burst:
        overrides["send_burst"] = scenario.burst
    if scenario.blackout:
        overrides["send_blackout_seconds"] = scenario.blackout
        overrides["retry_after_form"] = "absent"
    return overrides


def ceiling(scenario: Scenario, rate: float) -> dict[str, str]:
    """RESETGATE_PROVIDER_MAX_RATE for the scenario; none (the default) for a share of 0."""
    if not scenario.ceiling_share:
        return {}
    peak = max(r for r, _ in parse_schedule(scenario.schedule)) if scenario.schedule else rate
    return {"RESETGATE_PROVIDER_MAX_RATE": str(round(scenario.ceiling_share * peak, 3))}


def report(run: Run) -> None:
    s, m, q = run.store, run.accepted_memory, run.queued_memory
    print(f"\n== {run.scenario.name}: {run.scenario.what}")
    print(
        f"   provider {run.provider}, N={run.n} R={run.scenario.schedule or f'{run.rate:g}'}/s "
        f"senders={run.senders}; "
        "non-default settings: " + ", ".join(f"{k}={v}" for k, v in run.settings.items())
    )
    print(
        f"   admitted in {run.admitted_s:.1f} s ({run.n / run.admitted_s:.0f}/s, "
        f"{ADMISSION_CLIENTS} clients, {run.admissions} admission processes"
        + (
            "; before the senders started, the clock starts at the first send)"
            if run.admit_ahead
            else "; the clock starts at the first admission)"
        )
    )
    print(
        f"   drain {run.drain_s:.1f} s, ideal {run.ideal_s:.1f} s, ratio {run.ratio:.3f} "
        f"(load average {run.load[0]:.1f} at the start, {run.load[1]:.1f} at the end)"
    )
    print(
        f"   sends {run.sends}, 429s {run.throttled} ({100 * run.throttled / run.n:.2f} % of N), "
        f"accepted then dropped {run.dropped}"
    )
    if run.outage_throttled >= 0:
        print(f"   429s during the {run.scenario.blackout:g} s outage: {run.outage_throttled}")
    print(
        f"   429s answered while the sandbox itself ran late: {run.throttled_after_stall} "
        f"(its loop stalled >= {STALL_SECONDS * 1000:.0f} ms {run.sandbox_stalls[0]} times, "
        f"longest {run.sandbox_stalls[1]:.0f} ms, {run.sandbox_stalls[2] / 1000:.1f} s late in "
        "all: the machine's load, not the pacing)"
    )
    print(
        f"   duplicates: sandbox {run.sandbox_duplicates}, store {s.duplicates}; "
        f"lost: sandbox {run.sandbox_lost}, store {s.lost}; states {dict(s.states)}"
    )
    print(f"   sender CPU {run.cpu_s:.1f} s = {run.cpu_per_1000:.2f} CPU-s per 1,000 emails")
    print(
        f"   Redis per accepted operation ({m.operations} with a one-attempt ledger): "
        f"{m.total:.0f} B = {audit.describe(m)}"
    )
    print(
        f"   Redis per queued operation ({q.operations} sampled as admission ended): "
        f"{q.total:.0f} B = {audit.describe(q)}"
    )
    print("   (MEMORY USAGE: key name, object and dict entry; not the ~24 B TTL entry per key)")
    if not run.admit_ahead and run.admitted_s > 0.5 * run.ideal_s:
        print("   WARNING: admission took over half the ideal time; it may be the bottleneck")
    for note in run.notes:
        print(f"   note: {note}")
    for line in run.timeline + run.profile:
        print(f"   {line}")
    figures.emit(headline(run))


def headline(run: Run) -> dict[str, str]:
    """What the performance page's table shows of a run (benchmarks/bench.py)."""
    s = run.store
    shown = {
        "drain": f"{run.ratio:.3f} x ideal ({run.drain_s:.1f} s / {run.ideal_s:.1f} s)",
        "429s": f"{run.throttled} ({100 * run.throttled / run.n:.2f} % of N)",
        "sent twice / lost (provider; store)": f"{run.sandbox_duplicates} / {run.sandbox_lost}"
        f" ({s.duplicates} / {s.lost})",
        "sender CPU-s per 1,000 emails": f"{run.cpu_per_1000:.2f}",
        "Redis per accepted operation": f"{run.accepted_memory.total:.0f} B",
    }
    if run.outage_throttled >= 0:
        shown["429s during the outage"] = str(run.outage_throttled)
    return shown


def summary(runs: list[Run]) -> None:
    print(
        f"\n{'scenario':<12} {'N':>6} {'drain s':>8} {'ideal s':>8} {'ratio':>6} "
        f"{'sends':>6} {'429s':>5} {'429 %N':>6} {'dup s/st':>8} {'lost s/st':>9} "
        f"{'CPU/1k':>6} {'B/accepted':>10} {'B/queued':>8}"
    )
    for r in runs:
        print(
            f"{r.scenario.name:<12} {r.n:>6} {r.drain_s:>8.1f} {r.ideal_s:>8.1f} "
            f"{r.ratio:>6.3f} {r.sends:>6} {r.throttled:>5} {100 * r.throttled / r.n:>6.2f} "
            f"{r.sandbox_duplicates:>3}/{r.store.duplicates:<4} "
            f"{r.sandbox_lost:>4}/{r.store.lost:<4} {r.cpu_per_1000:>6.2f} "
            f"{r.accepted_memory.total:>10.0f} {r.queued_memory.total:>8.0f}"
        )

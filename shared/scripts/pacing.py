"""A provider's shared schedule: the requests of its pacing (``pace_acquire.lua``,
``pace_feedback.lua``) and of its daily quota (``quota_take.lua``), with what they are told
and answer. Each lives under the provider's own hash tag, so every sender replica shares it;
the arithmetic of the rate is in the scripts only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from shared.keys import provider_pacing
from shared.scripts import Request, Script, part_of, unsent


@dataclass(frozen=True, slots=True)
class Tuning:
    """How the shared rate moves. One 429 costs a tenth of the rate; the rate then climbs
    back by 5 % of itself per second, and after 2 quiet seconds the probe adds a term that
    grows with the square of the quiet time, so a provider that stopped throttling (a
    schedule going back up, a shared quota freed) is found again within seconds."""

    cut: float = 0.9
    growth: float = 0.05  # share of the post-cut rate per second
    quiet_ms: int = 2000
    probe: float = 0.2  # share of the post-cut rate per second squared
    # Slots are reserved this far ahead: it bounds how stale a replica's view of a cut or a
    # block can be, and sets how many sends one round trip covers (rate x horizon).
    horizon_ms: int = 100
    # Below this rate the climb above the settled rate runs per slot, not per second: a
    # provider at 1 send/s is probed every few minutes, not every few seconds.
    slot_rate: float = 100.0
    # A measured cut lands this far under the rate the provider accepted: at exactly its
    # rate, the jitter of every send's arrival would make every other one a 429.
    settle: float = 0.95
    empty_cut: float = 0.5  # a 429 after nothing was accepted since the last cut
    # A fresh schedule's rate, doubled per accepted send until the first 429 (slow start).
    # At 10/s the first reservation held two slots, and when the first answer came back
    # after the second's 429 the cut measured nothing: slow-1 drained in 1.63 x, not 1.05.
    start_rate: float = 5.0
    # While every probe is refused (a 429 with no stated wait), the gap between two probes
    # stays under this share of the time refused so far, and at least probe_gap_ms: an
    # outage that ends is found within 4 % of its length (the floor alone, a probe every
    # 20 s, found a 90 s one up to 20 s late), at about 25 probes per e-fold of its length.
    outage_share: float = 0.04
    probe_gap_ms: int = 1000
    # A cut near the provider's rate after a calm spell (no cut for this long) climbs back to
    # the rate it was cut from within this time, fast at first and flat near it, then probes
    # beyond it as before (0: no way back but the climb).
    recover_ms: int = 1000


@dataclass(frozen=True, slots=True)
class Slots:
    count: int
    first_ms: float
    rate: float
    blocked_until: int
    wait_ms: int
    starting: bool = False  # a slow start: ask again as soon as a send is accepted

    def times_ms(self) -> list[float]:
        spacing = 1000 / self.rate
        return [self.first_ms + i * spacing for i in range(self.count)]


@dataclass(frozen=True, slots=True)
class Observation:
    """What one answer tells the shared schedule (:class:`PaceFeedback` sends these fields,
    in this order)."""

    now: int
    slot_ms: float  # when the send's slot was due: a 429 for an older slot cuts nothing
    throttled: bool = False
    blocked_until: int = 0
    hint: float = 0.0  # sends/s allowed until hint_until (0 = no hint)
    hint_until: int = 0
    returned_ms: float = 0.0  # span of reserved slots the caller dropped
    advised_rate: float = 0.0  # one send per whole-seconds wait a 429 advised (0 = none)
    accepted: int = 0  # sends this replica saw accepted and has not reported yet
    # The 429 stated when sending may resume (``blocked_until``): a pause, not congestion.
    stated: bool = False

    def matters(self, rate: float) -> bool:
        """True when the shared schedule must hear of it: a 429, a block, a lower cap."""
        return self.throttled or self.blocked_until > self.now or 0 < self.hint < rate


@dataclass(frozen=True, slots=True)
class Adjusted:
    rate: float
    blocked_until: int
    cut: bool


@dataclass(slots=True, kw_only=True)
class _Schedule:
    """What a request of a provider's schedule is given: whose schedule (its one key) and
    how it moves (the script is sent the parts of ``tuning`` it uses)."""

    KEYS: ClassVar[tuple[str, ...]] = ("pacing",)

    provider: str = unsent()
    tuning: Tuning = unsent()

    def keys(self) -> list[str]:
        return [provider_pacing(self.provider)]


@dataclass(slots=True, kw_only=True)
class PaceAcquire(_Schedule, Request[Slots]):
    """Reserve up to ``want`` slots of the provider's schedule (``tuning`` fills the rest)."""

    SCRIPT = Script("pace_acquire")

    now: int
    ceiling: float
    burst: float
    want: int
    horizon_ms: int = part_of("tuning")
    growth: float = part_of("tuning")
    quiet_ms: int = part_of("tuning")
    probe: float = part_of("tuning")
    accepted: int = 0
    slot_rate: float = part_of("tuning")
    start_rate: float = part_of("tuning")
    recover_ms: int = part_of("tuning")

    def decode(self, raw: Any) -> Slots:
        count, first_us, rate_milli, blocked, wait, starting = (int(x) for x in raw)
        return Slots(count, first_us / 1000, rate_milli / 1000, blocked, wait, bool(starting))


@dataclass(slots=True, kw_only=True)
class PaceFeedback(_Schedule, Request[Adjusted]):
    """Tell the provider's schedule what one answer said (``tuning``: how far it cuts)."""

    SCRIPT = Script("pace_feedback")

    seen: Observation
    floor: float
    cut: float = part_of("tuning")
    horizon_ms: int = part_of("tuning")
    settle: float = part_of("tuning")
    empty_cut: float = part_of("tuning")
    outage_share: float = part_of("tuning")
    probe_gap_ms: int = part_of("tuning")
    recover_ms: int = part_of("tuning")

    def decode(self, raw: Any) -> Adjusted:
        return Adjusted(int(raw[0]) / 1000, int(raw[1]), bool(int(raw[2])))


@dataclass(frozen=True, slots=True)
class Taken:
    taken: bool
    used: int
    reopens_at: int  # ms; when a send is free again (0 when one was taken)


@dataclass(slots=True, kw_only=True)
class QuotaTake(Request[Taken]):
    """Take one from a count over a rolling window (``delta`` 1), give one back (-1), or
    look (0): a provider's quota, or the public endpoint's admission budget."""

    SCRIPT = Script("quota_take")
    KEYS = ("quota",)

    counter: str = unsent()  # shared.keys.provider_quota(name), or keys.PUBLIC_BUDGET
    now: int
    window_ms: int
    slice_ms: int
    limit: int
    delta: int

    def keys(self) -> list[str]:
        return [self.counter]

    def decode(self, raw: Any) -> Taken:
        return Taken(bool(int(raw[0])), int(raw[1]), int(raw[2]))

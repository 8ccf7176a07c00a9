"""The sandbox tells its own stalls apart: a 429 answered while its loop ran late is the
machine's, not the client's pacing (services/sandbox/stalls.py). Pure: a fake clock."""

from __future__ import annotations

from services.sandbox.stalls import AFTER_SECONDS, STALL_SECONDS, TICK_SECONDS, StallWatch


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_on_time_loop_has_no_stall() -> None:
    clock = FakeClock()
    watch = StallWatch(clock)
    for _ in range(50):
        clock.now += TICK_SECONDS + 0.002  # a little late, as every timer is
        watch.tick()
    assert (watch.stalls, watch.stalled_recently(), watch.late) == (0, False, 0.0)


def test_a_late_tick_is_a_stall_and_the_requests_read_after_it_count_apart() -> None:
    clock = FakeClock()
    watch = StallWatch(clock)
    clock.now += TICK_SECONDS + STALL_SECONDS + 0.015
    assert watch.stalled_recently()  # inside the stall, before the timer noticed it
    watch.tick()
    assert watch.stalls == 1 and abs(watch.longest - STALL_SECONDS - 0.015) < 1e-9
    for _ in range(int(AFTER_SECONDS / TICK_SECONDS / 2)):
        clock.now += TICK_SECONDS
        watch.tick()
    assert watch.stalled_recently()  # requests that queued during it are read now
    for _ in range(int(AFTER_SECONDS / TICK_SECONDS)):
        clock.now += TICK_SECONDS
        watch.tick()
    assert not watch.stalled_recently()
    assert watch.stalls == 1


def test_the_time_late_adds_up_over_stalls_only() -> None:
    """What the storm reports as "late in all": each stall's lateness, not the few ms every
    on-time tick is behind."""
    clock = FakeClock()
    watch = StallWatch(clock)
    for late in (STALL_SECONDS + 0.01, 0.002, STALL_SECONDS + 0.03):
        clock.now += TICK_SECONDS + late
        watch.tick()
    assert watch.stalls == 2
    assert abs(watch.late - (2 * STALL_SECONDS + 0.04)) < 1e-9

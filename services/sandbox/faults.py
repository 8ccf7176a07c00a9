"""Fault injection decisions: a probability, an "every Nth", or both, on a seeded RNG."""

from __future__ import annotations

import random
from dataclasses import dataclass

from services.sandbox.settings import SandboxSettings


@dataclass
class Fault:
    """One kind of fault; ``count`` numbers the eligible requests seen so far."""

    probability: float = 0.0
    every: int = 0
    count: int = 0

    def fires(self, rng: random.Random) -> bool:
        if self.probability <= 0.0 and self.every <= 0:
            return False  # the hot path when nothing is injected
        self.count += 1
        if self.every > 0 and self.count % self.every == 0:
            return True
        return self.probability > 0.0 and rng.random() < self.probability


class Faults:
    """All faults of one sandbox, rebuilt (counters and RNG reset) on every config change,
    so a test that sets ``error_every=3`` knows the third next send fails."""

    def __init__(self, settings: SandboxSettings) -> None:
        self.rng = random.Random(settings.seed)
        self.error = _fault(settings, "error")
        self.slow = _fault(settings, "slow")
        self.drop = _fault(settings, "drop")
        self.late_error = _fault(settings, "late_error")
        self.duplicate_event = _fault(settings, "duplicate_event")
        self.out_of_order = _fault(settings, "out_of_order")
        self.poll_error = _fault(settings, "poll_error")


def _fault(settings: SandboxSettings, name: str) -> Fault:
    probability = getattr(settings, f"{name}_probability")
    every = getattr(settings, f"{name}_every")
    assert isinstance(probability, float) and isinstance(every, int)
    return Fault(probability=probability, every=every)

"""The paired comparison the timing check makes, without scipy (not installed).

Latencies measured one after another are not independent: on this machine the correlation
between one sample and the next was 0.8, and still 0.1-0.5 sixteen samples on (other
processes, the garbage collector, CPU frequency come in episodes). Two-sample tests that
assume independent samples (Kolmogorov-Smirnov, Mann-Whitney) then report differences that
are only episodes: they failed a run in CI at p 0.0007 and a quiet run here at p < 0.0001, with
no difference between the kinds. So the requests go in blocks, one of each kind in a random
order, back to back on one connection, and each kind is compared with the unknown login in
its own block, where both met the same episode: an exact two-sided sign test over the
blocks. Under "no difference" a kind is the slower of its pair half the time, whatever the
latencies' distribution.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median


@dataclass(frozen=True)
class Paired:
    slower: int  # blocks in which the kind took longer than the unknown login
    pairs: int  # blocks compared (ties left out)
    p: float  # exact two-sided sign test
    median_difference_us: float  # of the kind's time less the unknown login's, per block

    def __str__(self) -> str:
        return (
            f"slower in {self.slower} of {self.pairs} blocks, sign test p={self.p:.2g}, "
            f"median difference {self.median_difference_us:+.1f} µs"
        )


def compare(pairs: Sequence[tuple[int, int]]) -> Paired:
    """``pairs``: (the unknown login's ns, the kind's ns), one pair per block."""
    differences = [b - a for a, b in pairs if b != a]
    slower = sum(1 for d in differences if d > 0)
    return Paired(
        slower=slower,
        pairs=len(differences),
        p=sign_test_p(slower, len(differences)),
        median_difference_us=median(b - a for a, b in pairs) / 1000,
    )


def sign_test_p(k: int, n: int) -> float:
    """Two-sided P(a count at least as far from n/2 as k) for n fair coin tosses."""
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(k, n - k) + 1))
    return min(1.0, 2 * tail / 2**n)

"""Two-sample tests for the timing check, without scipy (not installed): Kolmogorov-Smirnov
(asymptotic p-value, Numerical Recipes' form) and Mann-Whitney U (normal approximation with
the tie correction). Both are distribution-free, so skewed latencies with long tails are fine.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median


@dataclass(frozen=True)
class Comparison:
    ks_statistic: float
    ks_p: float
    mwu_p: float
    median_difference_us: float  # b's median minus a's

    def __str__(self) -> str:
        return (
            f"KS D={self.ks_statistic:.4f} p={self.ks_p:.3f}, Mann-Whitney p={self.mwu_p:.3f}, "
            f"median difference {self.median_difference_us:+.1f} µs"
        )


def compare(a_ns: Sequence[int], b_ns: Sequence[int]) -> Comparison:
    return Comparison(
        ks_statistic=(d := ks_statistic(a_ns, b_ns)),
        ks_p=ks_p_value(d, len(a_ns), len(b_ns)),
        mwu_p=mann_whitney_p(a_ns, b_ns),
        median_difference_us=(median(b_ns) - median(a_ns)) / 1000,
    )


def ks_statistic(a: Sequence[float], b: Sequence[float]) -> float:
    """The largest distance between the two empirical distribution functions."""
    sa, sb = sorted(a), sorted(b)
    return max(
        abs(bisect_right(sa, x) / len(sa) - bisect_right(sb, x) / len(sb)) for x in (*sa, *sb)
    )


def ks_p_value(d: float, n: int, m: int) -> float:
    """P(D >= d) under "same distribution": the Kolmogorov distribution, small-sample corrected."""
    effective = math.sqrt(n * m / (n + m))
    lam = (effective + 0.12 + 0.11 / effective) * d
    if lam < 1e-3:
        return 1.0
    total = sum((-1) ** (j - 1) * math.exp(-2 * j * j * lam * lam) for j in range(1, 101))
    return min(1.0, max(0.0, 2 * total))


def mann_whitney_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of the Mann-Whitney U test (normal approximation, ties averaged)."""
    n, m = len(a), len(b)
    ranked = sorted([(x, 0) for x in a] + [(x, 1) for x in b])
    rank_sum_a, ties, i = 0.0, 0.0, 0
    while i < len(ranked):
        j = i
        while j + 1 < len(ranked) and ranked[j + 1][0] == ranked[i][0]:
            j += 1
        average = (i + j) / 2 + 1
        rank_sum_a += average * sum(1 for k in range(i, j + 1) if ranked[k][1] == 0)
        ties += (j - i + 1) ** 3 - (j - i + 1)
        i = j + 1
    u = rank_sum_a - n * (n + 1) / 2
    total = n + m
    variance = n * m / 12 * ((total + 1) - ties / (total * (total - 1)))
    if variance <= 0:
        return 1.0
    z = (u - n * m / 2) / math.sqrt(variance)
    return math.erfc(abs(z) / math.sqrt(2))

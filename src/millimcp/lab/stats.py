"""Statistics for the lab: quantiles, the Mann-Whitney U test, bootstrap intervals.

Pure Python (no numpy, no scipy), sized for the lab's samples (a run keeps at most 20,000
latencies):

* :func:`quantile`: the nearest-rank quantile of sorted values;
* :func:`mann_whitney`: the two-sided Mann-Whitney U test with the normal approximation,
  tie correction and continuity correction; also the probability that a value of ``b``
  exceeds one of ``a`` (the common-language effect size);
* :func:`bootstrap_quantile_diff`: a percentile-bootstrap interval of ``quantile(b, q) -
  quantile(a, q)``. The bootstrap replicate of a nearest-rank quantile is the ``m``-th
  smallest of ``n`` draws with replacement, which is ``sorted[ceil(n * U) - 1]`` with ``U``
  the ``m``-th order statistic of ``n`` uniforms, a ``Beta(m, n - m + 1)`` variate: each
  replicate costs one draw instead of a resample of ``n`` values, and is exactly the
  resampling bootstrap's;
* :func:`bootstrap_mean_diff`: the same interval for a difference of means (resampled).

Every bootstrap takes a seed, so the same inputs always give the same interval.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

__all__ = [
    "Interval",
    "MannWhitney",
    "bootstrap_mean_diff",
    "bootstrap_quantile_diff",
    "mann_whitney",
    "quantile",
]

DEFAULT_REPLICATES: Final = 4000
DEFAULT_SEED: Final = 20260728


def quantile(ordered: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-quantile (0 < q <= 1) of values sorted ascending."""
    if not ordered:
        raise ValueError("the quantile of no values")
    return ordered[_rank(len(ordered), q) - 1]


def _rank(n: int, q: float) -> int:
    """The 1-based rank of the nearest-rank ``q``-quantile among ``n`` values."""
    if not 0.0 < q <= 1.0:
        raise ValueError(f"a quantile must be in (0, 1], not {q}")
    return min(n, max(1, math.ceil(q * n - 1e-9)))


@dataclass(frozen=True, slots=True)
class MannWhitney:
    """The outcome of :func:`mann_whitney` (``b`` against ``a``)."""

    u: float
    """U of ``b``: pairs (a_i, b_j) with b_j > a_i, ties counting one half."""
    n_a: int
    n_b: int
    z: float
    """Positive when ``b`` tends to be larger."""
    p_value: float
    """Two-sided."""

    @property
    def prob_b_greater(self) -> float:
        """P(a value of ``b`` > a value of ``a``) + P(equal) / 2; 0.5 means no shift."""
        pairs = self.n_a * self.n_b
        return self.u / pairs if pairs else 0.5

    def significant(self, alpha: float = 0.05) -> bool:
        return self.p_value < alpha


def mann_whitney(a: Sequence[float], b: Sequence[float]) -> MannWhitney:
    """The two-sided Mann-Whitney U test of ``b`` against ``a`` (normal approximation).

    Ties get their average rank and shrink the variance (the tie correction); a continuity
    correction of 0.5 is applied. With no variance at all (every value equal) or an empty
    side, z is 0 and p is 1.
    """
    n_a, n_b = len(a), len(b)
    if n_a == 0 or n_b == 0:
        return MannWhitney(0.0, n_a, n_b, 0.0, 1.0)
    pooled = sorted([(float(x), 0) for x in a] + [(float(x), 1) for x in b])
    n = n_a + n_b
    rank_sum_b = 0.0
    ties = 0.0  # sum of t^3 - t over groups of equal values
    i = 0
    while i < n:
        j = i
        value = pooled[i][0]
        while j + 1 < n and pooled[j + 1][0] == value:
            j += 1
        average = (i + j) / 2 + 1  # ranks are 1-based
        in_b = sum(pooled[k][1] for k in range(i, j + 1))
        rank_sum_b += average * in_b
        t = j - i + 1
        if t > 1:
            ties += t**3 - t
        i = j + 1
    u_b = rank_sum_b - n_b * (n_b + 1) / 2
    mean_u = n_a * n_b / 2
    variance = n_a * n_b / 12 * ((n + 1) - ties / (n * (n - 1)))
    if variance <= 0:
        return MannWhitney(u_b, n_a, n_b, 0.0, 1.0)
    delta = u_b - mean_u
    corrected = max(0.0, abs(delta) - 0.5)
    z = math.copysign(corrected / math.sqrt(variance), delta) if corrected else 0.0
    p = math.erfc(abs(z) / math.sqrt(2))
    return MannWhitney(u_b, n_a, n_b, z, min(1.0, p))


@dataclass(frozen=True, slots=True)
class Interval:
    """A point estimate of a difference (``b - a``) and its bootstrap interval."""

    estimate: float
    low: float
    high: float
    confidence: float

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0


def bootstrap_quantile_diff(
    a: Sequence[float],
    b: Sequence[float],
    q: float,
    *,
    replicates: int = DEFAULT_REPLICATES,
    confidence: float = 0.95,
    seed: int = DEFAULT_SEED,
) -> Interval:
    """The percentile-bootstrap interval of ``quantile(b, q) - quantile(a, q)``."""
    if not a or not b:
        raise ValueError("a bootstrap needs values on both sides")
    sorted_a, sorted_b = sorted(a), sorted(b)
    rng = random.Random(seed)
    draws_a = _quantile_replicates(sorted_a, q, replicates, rng)
    draws_b = _quantile_replicates(sorted_b, q, replicates, rng)
    diffs = [y - x for x, y in zip(draws_a, draws_b, strict=True)]
    estimate = quantile(sorted_b, q) - quantile(sorted_a, q)
    return _interval(estimate, diffs, confidence)


def _quantile_replicates(
    ordered: Sequence[float], q: float, replicates: int, rng: random.Random
) -> list[float]:
    n = len(ordered)
    m = _rank(n, q)
    out = []
    for _ in range(replicates):
        u = rng.betavariate(m, n - m + 1)
        out.append(ordered[min(n, max(1, math.ceil(n * u))) - 1])
    return out


def bootstrap_mean_diff(
    a: Sequence[float],
    b: Sequence[float],
    *,
    replicates: int = DEFAULT_REPLICATES,
    confidence: float = 0.95,
    seed: int = DEFAULT_SEED,
) -> Interval:
    """The percentile-bootstrap interval of ``mean(b) - mean(a)`` (each side resampled)."""
    if not a or not b:
        raise ValueError("a bootstrap needs values on both sides")
    rng = random.Random(seed)
    n_a, n_b = len(a), len(b)
    diffs = [
        sum(rng.choices(b, k=n_b)) / n_b - sum(rng.choices(a, k=n_a)) / n_a
        for _ in range(replicates)
    ]
    return _interval(sum(b) / n_b - sum(a) / n_a, diffs, confidence)


def _interval(estimate: float, diffs: list[float], confidence: float) -> Interval:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), not {confidence}")
    diffs.sort()
    tail = (1.0 - confidence) / 2
    low = quantile(diffs, tail) if tail > 0 else diffs[0]
    high = quantile(diffs, 1.0 - tail)
    return Interval(estimate, low, high, confidence)

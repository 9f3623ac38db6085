"""The statistics behind ``millimcp compare`` (millimcp.lab.stats), checked by hand and by brute
force."""

from __future__ import annotations

import math
import random

import pytest

from millimcp.lab.stats import (
    bootstrap_mean_diff,
    bootstrap_quantile_diff,
    mann_whitney,
    quantile,
)


def test_quantile_is_nearest_rank() -> None:
    values = [float(x) for x in range(1, 101)]
    assert quantile(values, 0.5) == 50.0
    assert quantile(values, 0.95) == 95.0
    assert quantile(values, 0.99) == 99.0
    assert quantile(values, 1.0) == 100.0
    assert quantile([7.0], 0.99) == 7.0
    with pytest.raises(ValueError, match="no values"):
        quantile([], 0.5)
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        quantile(values, 0.0)


def test_mann_whitney_textbook_case() -> None:
    # U = 25 (every b above every a); sigma = sqrt(5*5*11/12); z = (25 - 12.5 - 0.5) / sigma
    test = mann_whitney([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
    assert test.u == 25
    sigma = math.sqrt(25 * 11 / 12)
    assert test.z == pytest.approx(12 / sigma)
    assert test.p_value == pytest.approx(math.erfc(12 / sigma / math.sqrt(2)))
    assert test.p_value == pytest.approx(0.0122, abs=1e-4)
    assert test.prob_b_greater == 1.0
    reverse = mann_whitney([6, 7, 8, 9, 10], [1, 2, 3, 4, 5])
    assert reverse.u == 0
    assert reverse.z == pytest.approx(-test.z)


def test_mann_whitney_u_matches_pair_counting_with_ties() -> None:
    rng = random.Random(3)
    a = [float(rng.randint(0, 9)) for _ in range(40)]  # many ties
    b = [float(rng.randint(3, 12)) for _ in range(50)]
    pairs = sum(1.0 if y > x else 0.5 if y == x else 0.0 for x in a for y in b)
    test = mann_whitney(a, b)
    assert test.u == pytest.approx(pairs)
    # the tie correction: variance with sum(t^3 - t) over groups of equal values
    pooled = a + b
    n = len(pooled)
    ties = sum(pooled.count(v) ** 3 - pooled.count(v) for v in set(pooled))
    variance = len(a) * len(b) / 12 * ((n + 1) - ties / (n * (n - 1)))
    expected_z = (pairs - len(a) * len(b) / 2 - 0.5) / math.sqrt(variance)
    assert test.z == pytest.approx(expected_z)
    assert test.significant()


def test_mann_whitney_degenerate_inputs() -> None:
    assert mann_whitney([1.0, 1.0], [1.0, 1.0]).p_value == 1.0  # no variance at all
    assert mann_whitney([], [1.0]).p_value == 1.0
    same = [float(x) for x in range(100)]
    assert mann_whitney(same, same).p_value == 1.0


def test_quantile_bootstrap_matches_resampling() -> None:
    """The one-draw-per-replicate bootstrap agrees with resampling whole samples."""
    rng = random.Random(1)
    a = [rng.lognormvariate(0, 0.5) for _ in range(300)]
    b = [rng.lognormvariate(0.1, 0.5) for _ in range(300)]
    for q in (0.5, 0.95):
        fast = bootstrap_quantile_diff(a, b, q, replicates=4000, seed=7)
        slow_rng = random.Random(11)
        diffs = sorted(
            quantile(sorted(slow_rng.choices(b, k=300)), q)
            - quantile(sorted(slow_rng.choices(a, k=300)), q)
            for _ in range(2000)
        )
        width = fast.high - fast.low
        assert fast.low == pytest.approx(quantile(diffs, 0.025), abs=0.1 * width)
        assert fast.high == pytest.approx(quantile(diffs, 0.975), abs=0.1 * width)
        assert fast.estimate == quantile(sorted(b), q) - quantile(sorted(a), q)


def test_bootstraps_are_seeded_and_see_shifts() -> None:
    rng = random.Random(2)
    a = [rng.gauss(10, 1) for _ in range(500)]
    b = [x * 1.3 for x in a]
    first = bootstrap_quantile_diff(a, b, 0.99, seed=5)
    assert first == bootstrap_quantile_diff(a, b, 0.99, seed=5)
    assert first.excludes_zero
    assert first.low > 0
    same = bootstrap_quantile_diff(a, a, 0.5)
    assert same.low <= 0 <= same.high
    mean = bootstrap_mean_diff([100.0, 101.0, 99.0, 100.0], [70.0, 71.0, 69.0, 70.0])
    assert mean.estimate == pytest.approx(-30.0)
    assert mean.high < 0
    with pytest.raises(ValueError, match="both sides"):
        bootstrap_mean_diff([], [1.0])

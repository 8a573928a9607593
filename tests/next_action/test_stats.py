"""The intervals of the next-action figures, checked against an independent computation: their
coverage over many simulated samples with known rates (issue #30 §3)."""

from __future__ import annotations

import random

import pytest

from compactlab.next_action.stats import Paired, Stratum, population, wilson


@pytest.mark.parametrize("x, n, low, high", [(81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605), (0, 20, 0.0, 0.1611),
                                             (1, 29, 0.0061, 0.1718)])
def test_wilson_against_newcombes_table(x, n, low, high):
    """Newcombe 1998 ("Two-sided confidence intervals for the single proportion", Table I, method 3)."""
    interval = wilson(x, n)
    assert interval.low == pytest.approx(low, abs=1e-4) and interval.high == pytest.approx(high, abs=1e-4)
    assert wilson(0, 0) == (0.0, 1.0)


def test_the_paired_difference_is_within_bounds_and_holds_the_estimate():
    for t in [Paired(10, 0, 0, 0), Paired(0, 5, 0, 5), Paired(3, 4, 1, 2), Paired(0, 0, 10, 0)]:
        d = population([Stratum(1000, t)], draws=500).difference
        assert -1 <= d.low <= t.difference <= d.high <= 1 and d.value == pytest.approx(t.difference)


@pytest.mark.parametrize("p_both, p_first, p_second, n", [(0.5, 0.1, 0.2, 40), (0.7, 0.05, 0.05, 20), (0.3, 0.3, 0.1, 60)])
def test_the_paired_difference_covers_the_true_difference_about_95_percent_of_the_time(p_both, p_first, p_second, n):
    """The difference's interval of one stratum of many calls (its posterior's, the stratified
    estimate's building block) covers the true difference close to nominally."""
    rng = random.Random(7)
    truth = p_first - p_second
    hits = 0
    trials = 300
    for k in range(trials):
        counts = [0, 0, 0, 0]
        for _ in range(n):
            u = rng.random()
            counts[0 if u < p_both else 1 if u < p_both + p_first else 2 if u < p_both + p_first + p_second else 3] += 1
        d = population([Stratum(100_000, Paired(*counts))], seed=k, draws=400).difference
        hits += d.low <= truth <= d.high
    assert 0.9 <= hits / trials <= 0.995

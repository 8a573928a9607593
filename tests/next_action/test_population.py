"""next-action as a population estimate (#46 §1): the budget spread over the strata by Neyman's
allocation, the strata weighted back to their real shares, and an interval that covers."""

from __future__ import annotations

import random

import pytest

from compactlab.next_action.sampling import MINIMUM, Candidate, allocate, choose
from compactlab.next_action.stats import Paired, Stratum, population


@pytest.mark.parametrize("n, lost, kept, expected", [
    (20, 15, 85, {True: 4, False: 16}),  # size times spread: 10.65 : 42.5
    (20, 9, 91, {True: 2, False: 18}),  # (the minimum: a stratum's spread needs two)
    (6, 10, 1, {True: 5, False: 1}),  # what one stratum lacks, the other takes up: 6 asked, 6 given
    (100, 3, 100, {True: 3, False: 97}),  # no stratum past its size
    (3, 1, 100, {True: 1, False: 2}),
    (1, 5, 5, {True: 1, False: 0}),
    (0, 3, 3, {True: 0, False: 0}),
    (200, 15, 85, {True: 15, False: 85}),
])
def test_neyman_allocation_spends_the_budget(n, lost, kept, expected):
    assert allocate(n, {True: lost, False: kept}) == expected


def test_the_lost_stratum_takes_up_what_the_other_lacks():
    """(#46 §8) 10 lossy candidates, 1 clean, --samples 6: six are drawn."""
    found = [Candidate(0, k, True) for k in range(10)] + [Candidate(0, 10, False)]
    chosen = choose(found, 6, seed=0, label="p")
    assert len(chosen) == 6 and sum(not c.lost for c in chosen) == 1 and MINIMUM == 2


def test_the_estimate_is_the_strata_weighted_by_their_shares():
    est = population([Stratum(15, Paired(1, 0, 3, 0), chance=0.2), Stratum(85, Paired(9, 0, 0, 1), chance=0.3)])
    assert est.agreement.value == pytest.approx(0.15 * 0.25 + 0.85 * 0.9)
    assert est.control.value == pytest.approx(0.15 * 1.0 + 0.85 * 0.9)
    assert est.difference.value == pytest.approx(est.agreement.value - est.control.value)
    assert est.chance == pytest.approx(0.15 * 0.2 + 0.85 * 0.3)
    assert est.above_chance.value == pytest.approx((est.agreement.value - est.chance) / (1 - est.chance))
    for e in (est.agreement, est.control, est.difference, est.above_chance):
        assert e.low <= e.value <= e.high
    # a stratum whose every candidate was asked has no sampling error; every sample agreeing still
    # leaves the interval its width where they are a few of many
    whole = population([Stratum(4, Paired(3, 0, 0, 1))])
    assert whole.agreement == (0.75, 0.75, 0.75)
    few = population([Stratum(400, Paired(10, 0, 0, 0))])
    assert few.agreement.value == 1.0 and few.agreement.low < 0.9
    # a stratum with candidates and no answer: no estimate over all of them
    assert population([Stratum(15, Paired(0, 0, 0, 0)), Stratum(85, Paired(5, 0, 0, 0))]) is None


def test_the_interval_covers_the_true_agreement_of_a_known_population():
    """A population of 20 lossy calls agreeing 30% of the time and 180 clean ones agreeing 90%: drawn
    by the allocation again and again, the 95% interval holds the true 84% about 95% of the time, and
    the estimate is unbiased (the unweighted mean of the samples is not: it over-weights the lossy)."""
    truth_lost = [k < 6 for k in range(20)]
    truth_kept = [k < 162 for k in range(180)]
    truth = (sum(truth_lost) + sum(truth_kept)) / 200
    rng = random.Random(7)
    covered, estimates, naive = 0, [], []
    runs = 200
    for r in range(runs):
        take = allocate(20, {True: 20, False: 180})
        lost = rng.sample(truth_lost, take[True])
        kept = rng.sample(truth_kept, take[False])
        est = population([Stratum(20, Paired(sum(lost), 0, 0, len(lost) - sum(lost))),
                          Stratum(180, Paired(sum(kept), 0, 0, len(kept) - sum(kept)))], seed=r, draws=800)
        covered += est.agreement.low <= truth <= est.agreement.high
        estimates.append(est.agreement.value)
        naive.append((sum(lost) + sum(kept)) / (len(lost) + len(kept)))
    assert covered / runs >= 0.9
    assert sum(estimates) / runs == pytest.approx(truth, abs=0.01)
    assert sum(naive) / runs < truth - 0.02  # (its lossy share 3 of 20 samples against 10% of the calls)


@pytest.mark.parametrize("interval, fails", [((-0.30, -0.12), True), ((-0.30, -0.05), False), ((-0.12, 0.02), False)])
def test_check_fails_a_policy_only_when_its_whole_interval_is_below_the_margin(interval, fails):
    """(#46 §8) check --next-action with a margin of 10 points: an interval wholly below -10 fails the
    policy; one straddling -10, or above it, passes."""
    from types import SimpleNamespace

    from compactlab.jobs.check import _next_action_gate

    p = SimpleNamespace(policy="p", samples=20, agreement=0.6, control_agreement=0.8, difference=sum(interval) / 2,
                        difference_interval=interval)
    said: list[str] = []
    failing = _next_action_gate(SimpleNamespace(policies=[p], spent_line=lambda: "spent"), 0.10,
                                lambda line, *_: said.append(line))
    assert bool(failing) is fails
    assert ("surely more than 10 points below the control" in " ".join(failing)) is fails


def test_check_says_a_policy_with_no_estimate_and_fails_nothing():
    from types import SimpleNamespace

    from compactlab.jobs.check import _next_action_gate

    p = SimpleNamespace(policy="p", samples=3, difference_interval=None,
                        unknown="no answered sample where a probe lost: no estimate over every candidate call")
    said: list[str] = []
    assert _next_action_gate(SimpleNamespace(policies=[p], spent_line=lambda: "spent"), 0.1,
                             lambda line, *_: said.append(line)) == []
    assert "no answered sample where a probe lost" in said[0]

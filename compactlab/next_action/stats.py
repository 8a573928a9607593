"""The intervals of the next-action figures: Wilson's score interval for a stratum's own agreement,
and the figures over every candidate call (``population``): each stratum weighted by its share of
the candidates, their intervals drawn from each stratum's posterior. Each sample is asked twice,
on the policy's context and on the control, so the two rates are of the same calls and their
difference is paired.
"""

from __future__ import annotations

import math

from ..plain import NamedTuple

#: the normal quantile of a two-sided 95% interval
Z95 = 1.959963984540054


class Interval(NamedTuple):
    low: float
    high: float


def wilson(successes: int, n: int, z: float = Z95) -> Interval:
    """Wilson's score interval of a proportion (0 to 1 when there is no sample)."""
    if n <= 0:
        return Interval(0.0, 1.0)
    p = successes / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    denominator = 1 + z * z / n
    return Interval(max(0.0, (centre - spread) / denominator), min(1.0, (centre + spread) / denominator))


class Paired(NamedTuple):
    """Paired outcomes: ``both`` agreed in both arms, ``first_only`` on the policy's context only,
    ``second_only`` on the control only, ``neither``."""

    both: int
    first_only: int
    second_only: int
    neither: int

    @property
    def n(self) -> int:
        return self.both + self.first_only + self.second_only + self.neither

    @property
    def difference(self) -> float:
        """The first rate minus the second."""
        return (self.first_only - self.second_only) / self.n if self.n else 0.0


class Stratum(NamedTuple):
    """A stratum of candidate calls: how many there are (``size``), the paired outcomes of those
    asked (``table``), and the chance agreement over all of them (``chance``: a random recorded
    action of the same transcript; ``repeat``: the previous action repeated), known offline."""

    size: int
    table: Paired
    chance: float = 0.0
    repeat: float = 0.0


class Estimate(NamedTuple):
    """A figure over every candidate call and its 95% interval."""

    value: float
    low: float
    high: float


class Population(NamedTuple):
    """A policy's figures over every candidate call, from stratified samples (#46 §1, §2)."""

    agreement: Estimate  # on the policy's context
    control: Estimate  # on the control
    difference: Estimate  # the policy's agreement minus the control's (paired)
    chance: float  # by chance: a random recorded action of the same transcript
    repeat: float  # by repeating the previous recorded action
    above_chance: Estimate  # (agreement - chance) / (1 - chance)


#: the draws of the posterior (seeded: the same samples, the same interval)
DRAWS = 4000
#: what the prior adds to each of a stratum's four paired cells: a quarter, so that each arm's rate
#: has Jeffreys' prior, Beta(1/2, 1/2), whose interval keeps its nominal coverage near 0 and 1
PRIOR = 0.25


def population(strata: list[Stratum], seed: int = 0, draws: int = DRAWS) -> Population | None:
    """The figures over every candidate call: each stratum's rates weighted by its share of the
    candidates (a stratified estimator). The intervals are the 2.5 and 97.5 percentiles of the
    figures drawn from each stratum's posterior, its four paired cells Dirichlet with the counts
    plus ``PRIOR`` each (each arm's rate then has Jeffreys' prior), a stratum whose every candidate
    was asked held at what it showed (it has no sampling error): the stratified form of Jeffreys'
    interval, which keeps its width where every sample agreed. None where a stratum with candidates has no answered sample
    (the estimate would leave it out)."""
    import random

    if any(s.size and not s.table.n for s in strata):
        return None
    strata = [s for s in strata if s.size]
    total = sum(s.size for s in strata)
    if not total:
        return None
    weights = [s.size / total for s in strata]
    chance = sum(w * s.chance for w, s in zip(weights, strata))
    repeat = sum(w * s.repeat for w, s in zip(weights, strata))

    def figures(cells: list[tuple[float, float, float, float]]) -> tuple[float, float, float, float]:
        first = sum(w * (c[0] + c[1]) for w, c in zip(weights, cells))
        second = sum(w * (c[0] + c[2]) for w, c in zip(weights, cells))
        return first, second, first - second, (first - chance) / (1 - chance) if chance < 1 else 0.0

    observed = [tuple(x / s.table.n for x in s.table) for s in strata]
    point = figures(observed)  # type: ignore[arg-type]
    rng = random.Random(f"population:{seed}")
    drawn: list[tuple[float, float, float, float]] = []
    for _ in range(draws):
        cells = []
        for s, seen in zip(strata, observed):
            if s.table.n >= s.size:
                cells.append(seen)
                continue
            g = [rng.gammavariate(x + PRIOR, 1.0) for x in s.table]
            total_g = sum(g)
            cells.append(tuple(x / total_g for x in g))
        drawn.append(figures(cells))  # type: ignore[arg-type]

    def estimate(k: int) -> Estimate:
        column = sorted(d[k] for d in drawn)
        return Estimate(point[k], min(point[k], column[int(0.025 * (draws - 1))]),
                        max(point[k], column[round(0.975 * (draws - 1))]))

    return Population(estimate(0), estimate(1), estimate(2), chance, repeat, estimate(3))

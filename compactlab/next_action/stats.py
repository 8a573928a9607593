"""The intervals of the next-action figures: Wilson's score interval for an agreement rate, and
Newcombe's hybrid score interval for the paired difference of two (method 10 of Newcombe 1998,
"Improved confidence intervals for the difference between binomial proportions based on paired
data", Statistics in Medicine 17:2635): each sample is asked twice, on the policy's context and on
the control, so the two rates are of the same calls and their difference is paired.
"""

from __future__ import annotations

import math
from typing import NamedTuple

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


def paired_difference(t: Paired, z: float = Z95) -> Interval:
    """Newcombe's interval (method 10) for the difference of the two rates of ``t``."""
    n = t.n
    if n == 0:
        return Interval(-1.0, 1.0)
    x1, x2 = t.both + t.first_only, t.both + t.second_only
    p1, p2 = x1 / n, x2 / n
    l1, u1 = wilson(x1, n, z)
    l2, u2 = wilson(x2, n, z)
    margins = (t.both + t.first_only) * (t.second_only + t.neither) * (t.both + t.second_only) * (t.first_only + t.neither)
    phi = (t.both * t.neither - t.first_only * t.second_only) / math.sqrt(margins) if margins else 0.0
    d = p1 - p2
    delta = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    epsilon = math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return Interval(max(-1.0, d - delta), min(1.0, d + epsilon))

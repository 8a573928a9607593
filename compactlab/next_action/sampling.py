"""Which calls the next-action check asks about (issue #30 §1, #46 §1).

A call is a candidate for a policy where the context the policy sent differs from what no
compaction sends (the replay's ``chars`` or ``messages`` differ from the raw ones: after a summary,
a snip, a cleared or persisted result) and the recorded reply has an action to compare with. The
candidates fall in two strata: calls at which a hindsight probe was lost, and the others.

Each policy's ``--samples`` is a budget spread over the strata by Neyman allocation: in proportion
to a stratum's candidates times the spread its paired difference is expected to have (``SPREAD``:
an arm disagrees with the other more often where a probe was lost), at least ``MINIMUM`` from a
stratum that has them (a stratum's own spread needs two), and what one stratum cannot take goes to
the other. The figures are then reweighted to the strata's real shares (``stats.stratified``), so
the headline is an estimate over every candidate call. The draw is seeded by the seed and the
policy's name: the same inputs and seed, the same samples.
"""

from __future__ import annotations

import math
import random

from ..engine.records import TurnRecord
from ..plain import dataclass


@dataclass(frozen=True)
class Candidate:
    """A call a policy's context differs at: ``transcript`` its index in the corpus."""

    transcript: int
    call: int
    lost: bool  # a hindsight probe of the reply was lost (not in the context, not recoverable)


def differs(record: TurnRecord) -> bool:
    """Whether the context the policy sent at this call is not what no compaction sends."""
    return record.chars != record.raw_chars or record.messages != record.raw_messages


def lost_at(record: TurnRecord) -> bool:
    return record.probes - record.probes_kept - record.probes_recoverable > 0


#: the spread (standard deviation) a stratum's paired difference is expected to have, before any
#: answer: an arm disagreeing with the other half the time where a probe was lost (sqrt 0.5), a
#: quarter of the time where none was (sqrt 0.25)
SPREAD = {True: 0.71, False: 0.5}
#: the fewest samples drawn from a stratum that has candidates (where it has that many)
MINIMUM = 2


def allocate(n: int, sizes: dict[bool, int], spread: dict[bool, float] = SPREAD) -> dict[bool, int]:
    """Neyman's allocation of ``n`` samples to strata of ``sizes`` candidates (see the module's
    docstring): each stratum's share of ``n`` in proportion to its size times its spread, raised to
    ``MINIMUM`` and cut to its size (the others sharing what that leaves), then rounded by the
    largest remainders."""
    n = min(n, sum(sizes.values()))
    active = sorted((h for h in sizes if sizes[h]), key=lambda h: -sizes[h])
    floor = {h: min(sizes[h], MINIMUM) for h in active}
    if n <= sum(floor.values()):  # (too small a budget for the minimum: the larger stratum first)
        out = dict.fromkeys(sizes, 0)
        for k in range(n):
            out[active[k % len(active)]] += 1
        return out
    fixed: dict[bool, int] = {}
    while True:
        free = [h for h in active if h not in fixed]
        left = n - sum(fixed.values())
        weight = sum(sizes[h] * spread[h] for h in free)
        ideal = {h: left * sizes[h] * spread[h] / weight for h in free}
        bound = {h: floor[h] if x < floor[h] else sizes[h] for h, x in ideal.items() if x < floor[h] or x > sizes[h]}
        if not bound or len(bound) == len(free):
            fixed.update(bound)
            break
        fixed.update(bound)
    free = [h for h in active if h not in fixed]
    out = {h: fixed.get(h, 0) for h in sizes}
    if free:
        for h in free:
            out[h] = math.floor(ideal[h])
        for h in sorted(free, key=lambda h: -(ideal[h] - math.floor(ideal[h])))[:n - sum(out.values())]:
            out[h] += 1
    return out


def choose(candidates: list[Candidate], n: int, seed: int, label: str) -> list[Candidate]:
    """``n`` of ``candidates`` by ``allocate`` over the strata (``lost``), in corpus order."""
    lost = sorted((c for c in candidates if c.lost), key=_order)
    kept = sorted((c for c in candidates if not c.lost), key=_order)
    take = allocate(n, {True: len(lost), False: len(kept)})
    rng = random.Random(f"{seed}:{label}")
    chosen = rng.sample(lost, take[True]) + rng.sample(kept, take[False])
    return sorted(chosen, key=_order)


def _order(c: Candidate) -> tuple[int, int]:
    return c.transcript, c.call

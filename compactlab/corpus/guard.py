"""Which candidate a job recommends: one rule, written once, for compare's pick, its "if you must
compact" fallback and tune's suggestion (#55 §3).

A candidate is a policy (or a tune front point) with its cost saving against no compaction, how
far it stands above the recall and retention floors (its ``lead``), and whether it costs more than
no compaction on the transcripts where no compaction fits the window (``dearer``, beyond a tie:
``dearer_than_none``). The rule (:func:`pick`):

1. Where no compaction fits the window, a candidate that costs more than it there is never
   recommended: no compaction is (``pick`` gives the reference, or None where the caller has none
   among the candidates: it then says so and recommends no compaction). Where no compaction does
   not fit, a candidate that is not dearer is preferred to one that is.
2. Of the rest, those within ``NEAR`` of the best lead keep as much of what the agent used (a near
   tie is a tie); among them the larger saving wins (rounded to ``PLACES``: an exact tie), then no
   compaction, then the label. The list's order never decides.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..plain import dataclass

#: a run costs more than no compaction by at least a cent or this share of no compaction's cost:
#: less is a tie (the figures are estimates; $0.000016 on a $0.05 transcript says nothing)
TIE_USD = 0.01
TIE_SHARE = 0.01
#: leads (recall or retention above their floors, shares) this close are a near tie: one referenced
#: result of 323 (0.3 points) must not outweigh a cost
NEAR = 0.01
#: savings equal to this many places are equal (the outputs' rounding)
PLACES = 6


def dearer_than_none(cost: float, raw: float) -> bool:
    """Whether ``cost`` is more than no compaction's ``raw`` beyond a tie (``TIE_USD``, ``TIE_SHARE``)."""
    more = cost - raw
    return bool(more > 0 and (more >= TIE_USD or more >= TIE_SHARE * raw))


def dearer_where_fits(runs: Iterable[tuple[str, Mapping[str, Any]]], fits: set[str]) -> bool:
    """Whether the runs (transcript, summary) cost more than no compaction, beyond a tie, summed
    over the transcripts ``fits`` where no compaction fits the window."""
    kept = [s for t, s in runs if t in fits]
    return bool(kept) and dearer_than_none(sum(s["cost_usd"] for s in kept), sum(s["raw_cost_usd"] for s in kept))


def dearer_policies(runs: Iterable[tuple[str, str, Mapping[str, Any]]]) -> list[str]:
    """Of runs (transcript, policy, summary), the policies that cost more than no compaction on the
    transcripts where no compaction fits the window (its history overflows nowhere: each summary's
    ``raw_overflows``): what no recommender names."""
    runs = list(runs)
    fits = {t for t, _, s in runs if not s.get("raw_overflows")}
    policies = list(dict.fromkeys(p for _, p, _ in runs))
    return [p for p in policies if dearer_where_fits(((t, s) for t, q, s in runs if q == p), fits)]


def under_floors(recall: float, retention: float, floors: tuple[float, float]) -> list[tuple[float, str, float, float]]:
    """The measures a candidate keeps under their floors (``floors``: recall's, retention's), each
    as (how far under, its name, its value, its floor), the furthest under first (recall first where
    they are as far under): what compare's verdict and tune's recommendation say it loses."""
    under = [(floor - value, name, value, floor) for name, value, floor in (
        ("recall", recall, floors[0]), ("retention", retention, floors[1])) if value < floor - 1e-12]
    return sorted(under, key=lambda u: -u[0])  # (stable)


def lead(recall: float, retention: float, floors: tuple[float, float]) -> float:
    """How far a candidate stands above the nearer of its floors (negative: under it): its
    ``Candidate.lead``."""
    return min(recall - floors[0], retention - floors[1])


@dataclass(frozen=True)
class Candidate:
    label: str
    saving: float  # the share of no compaction's cost it saves (negative: it costs more)
    lead: float = 0.0  # how far above the nearer floor it stands (0 for all: only cost orders them)
    dearer: bool = False  # it costs more than no compaction where no compaction fits (beyond a tie)
    reference: bool = False  # it is no compaction


def order(c: Candidate) -> tuple[float, bool, str]:
    """Cost, then no compaction, then label: how exact ties are broken."""
    return -round(c.saving, PLACES), not c.reference, c.label


def pick(candidates: Sequence[Candidate], reference_fits: bool) -> Candidate | None:
    """The candidate to recommend (see the module's docstring); None where every candidate costs
    more than no compaction where it fits and it is not among them (recommend no compaction)."""
    near = _near_best(candidates, reference_fits)
    return min(near, key=order) if near else None


def near_ties(candidates: Sequence[Candidate], reference_fits: bool, chosen: Candidate) -> list[str]:
    """The labels of the candidates other than ``chosen`` that keep about as much as the best of
    them (within ``NEAR``: ``pick`` chose among them by cost), in the rule's order."""
    return [c.label for c in sorted(_near_best(candidates, reference_fits), key=order) if c.label != chosen.label]


def _near_best(candidates: Sequence[Candidate], reference_fits: bool) -> list[Candidate]:
    """The candidates the rule chooses among by cost: those rule 1 keeps, within ``NEAR`` of their
    best lead."""
    cheap = [c for c in candidates if c.reference or not c.dearer]
    pool = cheap if reference_fits or cheap else list(candidates)
    if not pool:
        return []
    top = max(c.lead for c in pool)
    return [c for c in pool if c.lead >= top - NEAR]

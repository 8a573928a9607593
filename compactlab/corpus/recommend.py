"""What a tune recommends (#20 §2, #55): a paragraph, as compare's verdict, by the one rule of every
recommender (``guard.pick``): the front points that keep recall and retention within the margin
of no compaction's, the base as it is, and no compaction where it fits and can be set."""

from __future__ import annotations

from typing import Callable

from .guard import NEAR, Candidate, dearer_than_none, lead, near_ties, pick, under_floors
from .trials import Point, TuneResult
from .verdict import RETENTION_MARGIN, said_once


class _Judge:
    """What a recommendation judges a point by: the floors of recall and retention (no
    compaction's less the margin), what it says of a point, whether it costs more than none."""

    def __init__(self, result: TuneResult, margin: float) -> None:
        self.result, self.margin, ref = result, margin, result.reference
        self.recall_floor = round((ref.scores.get("recall", 1.0) if ref else 1.0) - margin, 6)
        self.retention_floor = round((ref.scores.get("retention", 1.0) if ref else 1.0) - margin, 6)
        self.floors = (_pct(self.recall_floor) if self.recall_floor == self.retention_floor else
                       f"{_pct(self.recall_floor)} (recall) and {_pct(self.retention_floor)} (retention)")

    def guarded(self, p: Point) -> bool:
        return (p.scores.get("recall", 1.0) >= self.recall_floor - 1e-12
                and p.scores.get("retention", 1.0) >= self.retention_floor - 1e-12)

    def said(self, p: Point) -> str:
        shown = [o for o in self.result.shown() if o in self.result.objectives or o in p.scores]
        return ", ".join(f"costs {_pct(-p.scores[o])} more" if o == "cost" and p.scores[o] < 0 else
                         f"{_word(o)} {_pct(p.scores[o])}" for o in shown)

    def lead(self, p: Point) -> float:
        """How far ``p`` stands above the nearer floor (negative: under it), as compare's guard has it."""
        return lead(p.scores.get("recall", 1.0), p.scores.get("retention", 1.0),
                    (self.recall_floor, self.retention_floor))

    def loses(self, p: Point, under_what: str = " the floor") -> str:
        """What ``p`` keeps under the floors, the measure furthest under first (``guard.under_floors``)."""
        under = under_floors(p.scores.get("recall", 1.0), p.scores.get("retention", 1.0),
                             (self.recall_floor, self.retention_floor))
        return ", and ".join(f"{o} {_pct(value)}, {gap * 100:.1f} points under{under_what}"
                             for gap, o, value, _ in under)

    def dearer(self, p: Point) -> bool:
        """Whether ``p`` costs more than no compaction, beyond a tie, over the transcripts where no
        compaction fits the window (compare's one rule: ``guard.dearer_where_fits``; none fits
        anywhere: not dearer); a study written before those sums were kept: over the corpus."""
        if "fits" in p.scores:
            return bool(p.scores["fits"]) and dearer_than_none(p.scores["cost_usd_where_fits"],
                                                                 p.scores["raw_cost_usd_where_fits"])
        ref = self.result.reference
        cost = p.scores.get("cost_usd")
        raw = p.scores.get("raw_cost_usd", ref.scores.get("cost_usd") if ref else None)
        return cost is not None and raw is not None and dearer_than_none(cost, raw)


def recommend(result: TuneResult, margin: float = RETENTION_MARGIN) -> str:
    """A paragraph, as compare's verdict: what to use, by the one rule of every recommender
    (``guard.pick``). The candidates are the front points that keep recall and retention within
    ``margin`` of no compaction's (``result.reference``'s; 1.0 without it) and differ from the
    base, the base as it is (where it keeps as much), and no compaction: where no compaction fits
    the window, nothing that costs more than it is suggested, it is instead."""
    base, ref = result.base_point, result.reference
    ref_fits = ref is not None and ref.feasible
    judge = _Judge(result, margin)
    result.floors = {"recall": judge.recall_floor, "retention": judge.retention_floor}
    if not result.front and not ref_fits:
        return _no_candidate(result)
    # (labelled by their values, so that an exact tie never depends on the front's order; the base first)
    candidates = {f"1 {_values(p)}": p for p in result.front if judge.guarded(p) and p.values != base.values}
    if base.feasible and judge.guarded(base):
        candidates["0 base"] = base
    no_off = result.no_off if result.no_off is not None else _no_off(result.harness)
    bar = ref_fits and not no_off  # (no compaction is the bar where it can be set)
    if bar:
        assert ref is not None
        candidates["no compaction"] = ref
    # (the base that saves exactly what no compaction saves never acted here: it ties as no compaction
    # does, and keeping it is the smaller change)
    same = {"0 base"} if round(base.scores.get("cost", 0.0), 6) == 0 else set()
    chosen = pick([Candidate(k, p.scores.get("cost", 0.0), 0.0, judge.dearer(p), p is ref or k in same)
                   for k, p in candidates.items()], bar)
    text = [f"The front has {len(result.front)} point(s) from {len(result.points)} trial(s)."]
    if result.current:
        text.append(f"{result.base} as it is: your current setting, {result.current}.")
    point = candidates.get(chosen.label) if chosen is not None else None
    must = _if_you_must(result, judge) if point is None else None
    result.chosen, result.passes = point or (must[0] if must else None), point is not None
    text += _beating(result, judge, must[0] if must else None)
    text.append(_chosen_sentence(result, judge, point, bar, must is not None))
    if must is not None:
        text.append(must[1])
    return said_once(" ".join(text + _asides(result, no_off if ref_fits else "")))


def _asides(result: TuneResult, no_off: str) -> list[str]:
    """What the recommendation adds after its pick: why no compaction is no candidate (``no_off``),
    a base that breaks something, a recall or a retention that tells nothing apart (as compare's
    verdict says them)."""
    base = result.base_point
    out = [f"(No compaction is not a candidate: {no_off}.)"] if no_off else []
    if not base.feasible:
        out.append(f"{result.base} as it is introduces a violation or overflows a window.")
    if "recall" in result.objectives and not base.scores.get("probes"):
        out.append("No reply in the corpus repeats a string first seen in a tool result: recall is 1.0 everywhere "
                   "and does not tell the candidates apart.")
    if "refs" in base.scores and not base.scores["refs"]:  # (retention's floor holds whatever the objectives)
        out.append("No session refers back to an earlier tool result: retention is 1.0 everywhere and does not tell "
                   "the candidates apart.")
    return out


def _if_you_must(result: TuneResult, judge: _Judge) -> tuple[Point, str] | None:
    """Where no point keeps recall and retention above the floors and no compaction cannot be
    recommended: compare's "if you must compact" (``verdict._if_you_must``, by the same rule,
    ``guard.pick`` by how far each stands above its floors): of the front points and the base that
    fit the window, the one that loses least of what the agent used, a near tie broken by cost; the
    point and its sentence. None where none fits (or every one costs more than no compaction, which
    fits)."""
    base, ref = result.base_point, result.reference
    usable = {f"1 {_values(p)}": p for p in result.front if p.feasible and p.values != base.values}
    if base.feasible:
        usable["0 base"] = base
    candidates = [Candidate(k, p.scores.get("cost", 0.0), judge.lead(p), judge.dearer(p)) for k, p in usable.items()]
    chosen = pick(candidates, ref is not None and ref.feasible)
    if chosen is None:
        return None
    point = usable[chosen.label]

    def named(p: Point) -> str:
        return f"{result.base} as it is" if p is base else f"front point {result.front.index(p) + 1}"

    ties = [named(usable[label]) for label in near_ties(candidates, ref is not None and ref.feasible, chosen)]
    use = (f"keep {result.base} as it is" if point is base else
           f"use {named(point)} ({_values(point, result.harness)})")
    saves = _saves(point) + ("" if point is base else f", where {result.base} as it is {_saves(base)}")
    keeps = (f"it and {' and '.join(ties)} lose about as little of what the agent used (within {NEAR * 100:g} point, "
             f"by whichever of recall and retention stands lower against its floor), and it {saves}" if ties else
             f"it loses the least of what the agent used and {saves}")
    policy = "" if point is base else f"; its policy is policies/front-{result.front.index(point) + 1:02d}.toml"
    return point, (f"If you must compact, {use}: of the points that fit the window {keeps}; but "
                   f"{judge.loses(point) or 'it is under the floor'}{policy}." +
                   ("" if point is base else _at_the_edge(result, point)))


def _at_the_edge(result: TuneResult, point: Point) -> str:
    """Where the point recommended sets a key of a ``--space`` the user gave to the lowest or
    highest value searched, a sentence that says so: a better point may lie beyond the range. ""
    where none is at an edge, or where a harness's settings were searched (their ranges end where
    the harness stops taking a value, or where compactlab's search of it does)."""
    if result.harness is not None:
        return ""
    said = []
    for param in result.params:
        value = point.values.get(param.key)
        ends = ((param.low, param.high) if param.kind in ("int", "float") else
                (min(param.choices), max(param.choices)) if param.choices and all(
                    isinstance(c, (int, float)) and not isinstance(c, bool) for c in param.choices) else None)
        if ends is None or ends[0] == ends[1] or not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        if value in ends:
            said.append(f"{_values(Point(point.number, {param.key: value}, {}))} is the "
                        f"{'lowest' if value == ends[0] else 'highest'} value searched")
    return f" {'; '.join(said)}: a better point may lie beyond it (--space searches a wider range)." if said else ""


def _saves(p: Point) -> str:
    cost = p.scores.get("cost", 0.0)
    return f"saves {_pct(cost)}" if cost >= 0 else f"costs {_pct(-cost)} more than no compaction"


def _no_candidate(result: TuneResult) -> str:
    """No front point, and no compaction does not fit: keep the base where it fits and breaks
    nothing, else say what it breaks too (lest "keep" read as "it passes"). A front left empty by
    trials that fit, the base as it is covering each (``tune.covers``), says that instead."""
    base = result.base_point
    if base.feasible and any(p.feasible for p in result.points):
        return (f"No point of the front of the {len(result.points)} trials improves on {result.base} as it is: it "
                f"costs no more than each and keeps as much of recall and retention. Keep {result.base}, or widen "
                "the space.")
    why = (f"No candidate qualifies: every one of the {len(result.points)} trials introduced a violation or "
           "overflowed a window")
    if base.feasible:
        return f"{why}. Keep {result.base}, or widen the space."
    v, o = int(base.scores.get("violations", 0)), int(base.scores.get("overflows", 0))
    breaks = " and ".join(x for x in (f"introduces {v:,} violation(s)" if v else "",
                                      f"overflows the window at {o:,} call(s)" if o else "") if x)
    return (f"{why}, and so does {result.base} as it is{f' (it {breaks})' if breaks else ''}, while no "
            "compaction overflows the window: widen the space, or allow violations with --max-violations.")


def _beating(result: TuneResult, judge: _Judge, must: Point | None = None) -> list[str]:
    """A front point as good as the base or better on every objective (better on one) but under the
    floor: said, and why it is not recommended (not where it is the one to use if you must)."""
    objs, base = result.objectives, result.base_point
    beating = [p for p in result.front if all(p.scores[o] >= base.scores[o] for o in objs)
               and any(p.scores[o] > base.scores[o] for o in objs) and not judge.guarded(p)]
    if not beating or beating[0] is must:
        return []
    p = beating[0]
    return [f"Front point {result.front.index(p) + 1} ({_values(p, result.harness)}) is as good as {result.base} "
            f"or better on every objective but is under the floor of {judge.floors} (no compaction's less the "
            f"{judge.margin * 100:.0f}-point margin): {judge.loses(p, '')}, so it is not recommended."]


def _chosen_sentence(result: TuneResult, judge: _Judge, point: Point | None, bar: bool, must: bool = False) -> str:
    """What to use: no point, no compaction, the base as it is, or a front point (``must``: none,
    and the one to use if you must compact is said after this)."""
    base, floors, margin = result.base_point, judge.floors, judge.margin
    if point is None:
        # (the base is no candidate either: said with its figures, lest "keep" read as "it passes")
        nor = "" if judge.guarded(base) else f", and neither does {result.base} as it is ({judge.said(base)})"
        none = (f"None of them keeps recall and retention above the floor of {floors} (no compaction's less the "
                f"{margin * 100:.0f}-point margin){nor}")
        return (f"{none}: no point of this space passes." if must else
                f"{none}: no point of this space is recommended; keep {result.base} as it is, or widen the space.")
    if point is result.reference:
        why = (f"{result.base} as it is costs {_pct(-base.scores.get('cost', 0.0))} more than no compaction"
               if judge.dearer(base) else f"{result.base} as it is does not keep what the agent used"
               if not judge.guarded(base) else f"{result.base} as it is saves nothing")
        return (f"Use no compaction (-p none): it fits the window, {why}, and no front point that keeps recall and "
                f"retention above the floor of {floors} costs less than it.")
    if point is base:
        return (f"Keep {result.base} as it is ({judge.said(base)}): no front point that keeps recall and retention "
                f"above the floor of {floors} saves more{' without costing more than no compaction' if bar else ''}.")
    return _use_point(result, point, judge.said, floors, bar) + _at_the_edge(result, point)


def _use_point(result: TuneResult, point: Point, said: Callable[[Point], str], floors: str, bar: bool) -> str:
    """The recommendation of a front point, against the base as it is."""
    base, n = result.base_point, result.front.index(point) + 1
    broken = int(point.scores.get("violations", 0))
    values = _values(point, result.harness)
    if all(point.scores[o] >= base.scores[o] for o in result.objectives):
        return (f"Use front point {n} ({values}): it {said(point)}, where {result.base} as it is {said(base)}: as "
                f"good or better on every objective, with "
                f"{f'{broken} violation(s), within --max-violations,' if broken else 'no violation'} and no "
                f"overflow; its policy is policies/front-{n:02d}.toml.")
    # (said of this point only: another, under the floor, may be as good as the base on every objective)
    behind = [_ON[o] for o in result.objectives if point.scores[o] < base.scores[o]]
    return (f"Of the points that keep recall and retention above the floor of {floors}"
            f"{' and cost no more than no compaction' if bar else ''}, front point {n} ({values}) saves the most: "
            f"it {said(point)}, where {result.base} as it is {said(base)}, which it trails on "
            f"{' and '.join(behind)}; its policy is policies/front-{n:02d}.toml.")


def _no_off(name: str | None) -> str:
    """Why no compaction cannot be set in harness ``name`` ("" where it can, or no harness)."""
    if name is None:
        return ""
    from .harness_settings import harness

    return harness(name).no_off


def _values(p: Point, harness: str | None = None) -> str:
    """A point's values: as the harness's settings where a harness's were searched."""
    if harness is not None:
        from .harness_settings import harness as of

        return ", ".join(f"{k}={v}" for k, v in of(harness).setting_values(p.values).items())
    return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in p.values.items())


#: an objective as "which it trails on …" names it
_ON = {"cost": "the saving", "recall": "recall", "retention": "retention", "reduction": "tokens saved"}


def _word(objective: str) -> str:
    return {"cost": "saves", "recall": "recall", "retention": "retention", "reduction": "tokens saved"}[objective]


def _pct(x: float) -> str:
    return f"{x * 100:.1f}%"

"""What a tune recommends (#20 §2, #55): a paragraph, as compare's verdict, by the one rule of every
recommender (``guard.pick``): the front points that keep recall and retention within the margin
of no compaction's, the base as it is, and no compaction where it fits and can be set."""

from __future__ import annotations

from typing import Callable

from .guard import Candidate, dearer_than_none, pick
from .trials import Point, TuneResult
from .verdict import RETENTION_MARGIN


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

    def dearer(self, p: Point) -> bool:
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
    if not result.front and not ref_fits:
        return _no_candidate(result)
    # (labelled by their values, so that an exact tie never depends on the front's order; the base first)
    candidates = {f"1 {_values(p)}": p for p in result.front if judge.guarded(p) and p.values != base.values}
    if base.feasible and judge.guarded(base):
        candidates["0 base"] = base
    no_off = _no_off(result.harness)
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
    text += _beating(result, judge)
    point = candidates.get(chosen.label) if chosen is not None else None
    result.chosen = point
    text.append(_chosen_sentence(result, judge, point, bar))
    if no_off and ref_fits:
        text.append(f"(No compaction is not a candidate: {no_off}.)")
    if not base.feasible:
        text.append(f"{result.base} as it is introduces a violation or overflows a window.")
    if "recall" in result.objectives and not base.scores.get("probes"):
        text.append("No reply in the corpus repeats a string first seen in a tool result: recall is 1.0 everywhere "
                    "and does not tell the candidates apart.")
    return " ".join(text)


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


def _beating(result: TuneResult, judge: _Judge) -> list[str]:
    """A front point as good as the base or better on every objective (better on one) but under the
    floor: said, and why it is not recommended."""
    objs, base = result.objectives, result.base_point
    beating = [p for p in result.front if all(p.scores[o] >= base.scores[o] for o in objs)
               and any(p.scores[o] > base.scores[o] for o in objs) and not judge.guarded(p)]
    if not beating:
        return []
    p = beating[0]
    return [f"Front point {result.front.index(p) + 1} ({_values(p, result.harness)}) is as good as {result.base} "
            f"or better on every objective but keeps {_pct(p.scores.get('recall', 1.0))} of what the agent later used and "
            f"{_pct(p.scores.get('retention', 1.0))} of the referenced results: below the floor of {judge.floors} "
            f"(no compaction's less the {judge.margin * 100:.0f}-point margin), so it is not recommended."]


def _chosen_sentence(result: TuneResult, judge: _Judge, point: Point | None, bar: bool) -> str:
    """What to use: no point, no compaction, the base as it is, or a front point."""
    base, floors, margin = result.base_point, judge.floors, judge.margin
    if point is None:
        # (the base is no candidate either: said with its figures, lest "keep" read as "it passes")
        nor = "" if judge.guarded(base) else f", and neither does {result.base} as it is ({judge.said(base)})"
        return (f"None of them keeps recall and retention above the floor of {floors} (no compaction's less "
                f"the {margin * 100:.0f}-point margin){nor}: no point of this space is recommended; keep "
                f"{result.base} as it is, or widen the space.")
    if point is result.reference:
        why = (f"{result.base} as it is costs {_pct(-base.scores.get('cost', 0.0))} more than no compaction"
               if judge.dearer(base) else f"{result.base} as it is does not keep what the agent used"
               if not judge.guarded(base) else f"{result.base} as it is saves nothing")
        return (f"Use no compaction (-p none): it fits the window, {why}, and no front point that keeps recall and "
                f"retention above the floor of {floors} costs less than it.")
    if point is base:
        return (f"Keep {result.base} as it is ({judge.said(base)}): no front point that keeps recall and retention "
                f"above the floor of {floors} saves more{' without costing more than no compaction' if bar else ''}.")
    return _use_point(result, point, judge.said, floors, bar)


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

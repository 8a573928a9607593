"""Which policy to use: the verdict of a compare, across its transcripts.

Per policy (or swept value): what it saved in cost over all the transcripts together (their cost
against the same transcripts with no compaction; with a seeded bootstrap interval over the
transcripts) and per transcript (median and spread), tokens, retention, recall, violations it
introduced, overflows, summaries, and on how many transcripts it cost more than no compaction.

No compaction is the reference (``compare`` always runs it). A policy can be recommended only if
it introduces no violation, overflows no window on a transcript where another candidate fits, keeps
recall and retention within ``margin`` (an absolute share) of no compaction's, and, while no
compaction is itself a candidate, does not cost more than it on half the transcripts or more.
The recommendation is the best total cost saving among those; where none passes, the best that
fits the window, with what it loses. Then why each policy that saved more lost, as trade-offs.
"""

from __future__ import annotations

import copy
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import field, fields
from typing import TYPE_CHECKING, Any, Protocol

from .. import metrics
from ..core import in_use
from ..engine.records import ACTIONS
from ..plain import dataclass, pattern
from .guard import (NEAR, TIE_SHARE, Candidate, dearer_than_none, dearer_where_fits, lead, near_ties, pick,
                    under_floors)


class JudgedRun(Protocol):
    """What the verdict reads of a run (``compare.RunResult`` is one): its transcript, policy,
    swept values and summary (summary.json's numbers)."""

    @property
    def transcript(self) -> str: ...
    @property
    def policy(self) -> str: ...
    @property
    def swept(self) -> Mapping[str, Any]: ...
    @property
    def summary(self) -> Mapping[str, Any]: ...

#: how far below the best retention a recommended policy may be (share of references)
RETENTION_MARGIN = 0.05


@dataclass
class Entry(metrics.Named):
    """One policy (or swept value) across the transcripts: every metric of its runs' summed parts
    (``e.recall``, ``e.refs``: ``totals``, each metric as the outputs give it), and how they spread."""

    label: str
    policy: str
    swept: dict[str, Any]
    transcripts: int
    totals: metrics.Numbers  # the metric parts of its runs, summed
    median_saving: float  # per transcript
    saving_p25: float
    saving_p75: float
    costs_more: int  # transcripts where it cost more than no compaction
    peak_tokens: int = 0  # the largest context it sent
    actions: int = 0  # what it did: persisted, snipped, cleared, summarised, reactive, manual (0: never acted)
    saving_low: float = 0.0  # the total saving's 95% bootstrap interval over transcripts (seeded)
    saving_high: float = 0.0

    if not TYPE_CHECKING:  # (typed by metrics.Named: a name that is no metric or part is a type error)
        def __getattr__(self, name: str) -> Any:
            """A metric as the outputs give it (``Metric.shown``), or a summed part."""
            if name.startswith("_") or name == "totals":
                raise AttributeError(name)
            m = metrics.METRICS.get(name)
            if m is not None:
                return m.shown(self.totals.parts)
            if name in metrics.PARTS:
                return _part(self.totals.parts[name])
            raise AttributeError(name)

    def to_dict(self) -> dict[str, Any]:
        """results.json's entry: its names, every metric, every part that is none, the spread."""
        head = {"label": self.label, "policy": self.policy, "swept": dict(self.swept), "transcripts": self.transcripts}
        parts = self.totals.parts
        return {**head, **{name: m.shown(parts) for name, m in metrics.METRICS.items()},
                **{name: _part(v) for name, v in parts.items() if name not in metrics.METRICS},
                "median_saving": self.median_saving, "saving_p25": self.saving_p25, "saving_p75": self.saving_p75,
                "costs_more": self.costs_more, "peak_tokens": self.peak_tokens, "actions": self.actions,
                "saving_low": self.saving_low, "saving_high": self.saving_high}


def _part(value: float) -> float:
    """A summed part as the outputs give it: a count whole, a cost to 6 places."""
    return value if isinstance(value, int) else round(value, 6)


@dataclass
class Verdict:
    entries: list[Entry]  # best cost saving first
    recommended: str | None
    runner_up: str | None
    recommendation: str
    margin: float = RETENTION_MARGIN
    no_references: bool = False  # no transcript has a reference: retention says nothing
    swept: list[str] = field(default_factory=list)
    reference: str | None = None  # the no-compaction entry the others are held to
    recall_floor: float = 1.0 - RETENTION_MARGIN  # what a recommended policy keeps at least
    retention_floor: float = 1.0 - RETENTION_MARGIN
    passes: bool = True  # the recommended policy passes the guard (False: none did; the one that loses least)
    #: where the recommended policy is a harness's or framework's preset: the harness ("claude-code:"),
    #: then the setting that makes it, in the harness's own form (``harness_settings.setting_of``); the
    #: harness alone where the preset is its default (nothing to set)
    setting: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: [e.to_dict() for e in self.entries] if f.name == "entries" else copy.deepcopy(getattr(self, f.name))
                for f in fields(self)}


def label_of(policy: str, swept: dict[str, Any], units: dict[str, str] | None = None) -> str:
    """A policy and its swept values, each with its unit ("s08 summary.trigger=20000 chars"); a
    key the policy does not use is "n/a"."""
    return policy + "".join(f" {k}={_shown(v, (units or {}).get(k))}" for k, v in swept.items()
                            if _shown(v, None) != "n/a")


def _shown(value: Any, unit: str | None) -> str:
    if value is None or (isinstance(value, float) and value != value):  # None, or NaN in a frame
        return "n/a"
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # a column with an n/a in it is float
    return f"{value} {unit}" if unit else str(value)


#: bootstrap resamples of the corpus for the saving's interval (seeded: the same runs, the same interval)
BOOTSTRAP = 1000
#: the bootstrap's draws held at once (resamples x transcripts)
BOOTSTRAP_CELLS = 1 << 20
#: fewer transcripts than this and the bootstrap's percentiles are not called a 95% interval: a
#: resample of 2 or 3 transcripts is one transcript's saving 1 time in 4 or in 9, so its 2.5th and
#: 97.5th percentiles are the lowest and highest transcript's own, and a percentile bootstrap of
#: under ten or so values covers less than it says
FEW_FOR_INTERVAL = 10


class _Guard:
    """The verdict's rules, one method each: what refuses a policy outright (``fatal``), what it
    loses of what the agent used against no compaction's floors (``loses``), and why it does not
    pass (``why_not``: either, or costing more than no compaction on half its transcripts)."""

    def __init__(self, entries: list[Entry], runs: Sequence[JudgedRun], ref: Entry | None, margin: float,
                 overflowed: dict[str, set[str]], grouped: dict[str, list[JudgedRun]]) -> None:
        self.ref, self.margin, self.overflowed, self.grouped = ref, margin, overflowed, grouped
        self.recall_floor = round((ref.recall if ref else 1.0) - margin, 6)
        self.retention_floor = round((ref.retention if ref else 1.0) - margin, 6)
        # where some policy fits the window: a policy that overflows there is refused
        # (whatever else it breaks: a window some policy fits is one the others could fit too)
        self.transcripts = {r.transcript for r in runs}
        self.fits = {t for t in self.transcripts if any(t not in overflowed[e.label] for e in entries)}
        self.reference_fits = ref is not None and self.fatal(ref) is None

    def fatal(self, e: Entry) -> str | None:
        if e.violations_introduced:
            return f"it introduces {e.violations_introduced} tool-pairing violation(s) the API would reject"
        # (one rule for every policy, no compaction too: an overflow is fatal where another policy fits;
        # where none does, no listed policy can help, and the verdict says so)
        if self.overflowed[e.label] & self.fits:
            n = len(self.overflowed[e.label] & self.fits)
            return (f"{e.overflows} of its calls overflow the context window (the API would refuse them), on "
                    f"{n} transcript(s) where another policy fits")
        return None

    def loses(self, e: Entry) -> str | None:
        """What ``e`` keeps under the floors, the measure furthest under first (it sets its lead,
        ``lead``: what the fallback weighs), the other after it where it is under too."""
        under = under_floors(e.recall, e.retention, (self.recall_floor, self.retention_floor))
        if not under:
            return None
        gap, name, value, floor = under[0]
        said = (f"{name} {_pct(value)} ({MEANINGS[name]}), {_points(gap)} under the {_pct(floor)} floor "
                f"{_floor_made(floor, self.margin)}")
        for gap, name, value, _ in under[1:]:
            said += f", and {name} {_pct(value)}, {_points(gap)} under its floor"
        return said

    def why_not(self, e: Entry) -> str | None:
        if (reason := self.fatal(e) or self.loses(e)) is not None:
            return reason
        if self.reference_fits and e is not self.ref and e.costs_more * 2 >= e.transcripts and e.transcripts > 1:
            return (f"it costs more than no compaction on {e.costs_more} of its {e.transcripts} transcripts: its "
                    f"total saving rests on the others{_where_it_saves(self.grouped[e.label])}")
        if self.dearer_where_fits(e):
            where = self.where_reference_fits()
            return (f"it costs more than no compaction on the {len(where)} transcript(s) where no compaction fits "
                    f"the window")
        return None

    def where_reference_fits(self) -> set[str]:
        """The transcripts no compaction sends without overflowing (none without it)."""
        return self.transcripts - self.overflowed[self.ref.label] if self.ref is not None else set()

    def dearer_where_fits(self, e: Entry) -> bool:
        """Whether ``e`` costs more than no compaction, beyond a tie, summed over the transcripts
        where no compaction fits the window (the one rule's ``dearer``: ``guard.py``)."""
        if self.ref is None or e is self.ref:
            return False
        return dearer_where_fits(((r.transcript, r.summary) for r in self.grouped[e.label]), self.where_reference_fits())

    def candidate(self, e: Entry, lead: bool = False) -> Candidate:
        """``e`` as the one rule sees it (``lead``: ordered by what it keeps first, as the fallback is)."""
        return Candidate(e.label, e.cost_saving, self.lead(e) if lead else 0.0, self.dearer_where_fits(e), e is self.ref)

    def lead(self, e: Entry) -> float:
        """How far ``e`` stands above the nearer floor (negative: under it)."""
        return lead(e.recall, e.retention, (self.recall_floor, self.retention_floor))


def judge(runs: Sequence[JudgedRun], sweep_keys: list[str], margin: float = RETENTION_MARGIN,
          units: dict[str, str] | None = None, reference: str | None = None,
          triggers: dict[str, str] | None = None) -> Verdict:
    """The verdict of a compare's runs (in the order the report lists them: an entry's place
    among equal savings is its first run's); ``reference``:
    the label of no compaction's entry (without one, no compaction's recall and retention are 1.0,
    as they are by construction); ``triggers``: what makes each policy act, in words (label ->
    "summary past 167,000 tokens"), to say why one never did."""
    entries, overflowed, grouped = _entries(runs, sweep_keys, units)
    # a tie with no compaction: it first; other ties by label (the pick never depends on the list's order)
    entries.sort(key=lambda e: (-e.cost_saving, e.label != reference, e.label))
    if not entries:
        return Verdict([], None, None, "No run finished.", margin, True, list(sweep_keys), reference)
    ref = next((e for e in entries if e.label == reference), None)
    guard = _Guard(entries, runs, ref, margin, overflowed, grouped)
    no_refs = not any(e.refs for e in entries)
    floors = (guard.recall_floor, guard.retention_floor)
    fit = {e.label: e for e in entries if guard.why_not(e) is None}
    chosen = pick([guard.candidate(e) for e in fit.values()], guard.reference_fits)
    if chosen is None:
        return _if_you_must(entries, guard, sweep_keys, reference, no_refs)
    best = fit[chosen.label]
    above = entries[:entries.index(best)][:3]  # saved more, and lost
    runner = above[0] if above else next((e for e in entries if e is not best), None)
    text = [_praise(best, len(guard.transcripts), ref), *_trade_offs(best, above, runner, guard)]
    if runner is not None and not above:
        text.append(f"The runner-up, {runner.label}, lost: {_behind(best, runner, guard.why_not(runner))}.")
    text += _notes(entries, guard, best, runner, bool(above), triggers, no_refs)
    text += _timing(entries, sweep_keys)
    return Verdict(entries, best.label, runner.label if runner else None, said_once(" ".join(text)), margin, no_refs,
                   list(sweep_keys), reference, *floors)


#: what each measure the guard holds to a floor means, said with it the first time a verdict names it
MEANINGS = {"recall": "its contexts hold that much of what the agent later used",
            "retention": "the referenced tool results it keeps"}


def _floor_made(floor: float, margin: float) -> str:
    """How a floor is made, said after it: "(no compaction's 100.0% less the 5-point margin)"."""
    return f"(no compaction's {_pct(floor + margin)} less the {margin * 100:.0f}-point margin)"


_EXPLAINED = pattern(r" \((?:" + "|".join(MEANINGS.values()) +  # (plain words: nothing to escape)
                     r"|no compaction's (?:[0-9.]+% )?less the [0-9]+-point margin)\)")


def said_once(text: str) -> str:
    """A verdict's text with each measure's meaning and each floor's making said where it first
    stands, not again after each policy the verdict names (a compare of Claude Code sessions where
    none passed repeated both for each of three policies, then once more for the one to use); tune's
    recommendation too."""
    seen: set[str] = set()

    def once(m: Any) -> str:
        if m.group(0) in seen:
            return ""
        seen.add(m.group(0))
        return m.group(0)

    return _EXPLAINED.sub(once, text)


def _and(labels: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return labels[0] if len(labels) == 1 else f"{', '.join(labels[:-1])} and {labels[-1]}"


def _if_you_must(entries: list[Entry], guard: _Guard, sweep_keys: list[str], reference: str | None,
                 no_refs: bool) -> Verdict:
    """The verdict where no policy passes: the one that loses least of what the agent used (then
    saves most) among those that fit the window; one that costs more than no compaction only where
    none saves (no compaction itself overflows here: it is no candidate)."""
    ref, margin, floors = guard.ref, guard.margin, (guard.recall_floor, guard.retention_floor)
    usable = [e for e in entries if guard.fatal(e) is None]
    reasons = "; ".join(f"{e.label}: {guard.why_not(e)}" for e in entries[:3])
    if not usable:
        return Verdict(entries, None, None, said_once(f"No policy qualifies ({reasons})."), margin, no_refs,
                       list(sweep_keys), reference, *floors, passes=False)
    by_label = {e.label: e for e in usable}
    candidates = [guard.candidate(e, lead=True) for e in usable]
    chosen = pick(candidates, guard.reference_fits)
    if chosen is None:  # (every policy that fits costs more than no compaction, which fits: it is the answer)
        assert ref is not None
        return Verdict(entries, ref.label, None, said_once(f"No policy passes the guard ({reasons}). Use {ref.label}: "
                       "every policy that fits the window costs more than no compaction where no compaction fits it."),
                       margin, no_refs, list(sweep_keys), reference, *floors)
    best = by_label[chosen.label]
    saving = (f"saves {_pct(best.cost_saving)}" if best.cost_saving >= 0 else
              f"costs about as much as no compaction ({_pct(best.cost_saving)}, within the bootstrap's noise: "
              f"{_pct(best.saving_low)} to {_pct(best.saving_high)})" if not _dearer_overall(best) else
              f"costs {_pct(-best.cost_saving)} more than no compaction, which overflows the window"
              + (f" on {len(guard.overflowed[ref.label])} transcript(s)" if ref is not None else ""))
    ties = near_ties(candidates, guard.reference_fits, chosen)
    keeps = (f"it and {_and(ties)} lose about as little of what the agent used (within {NEAR * 100:g} point, by "
             f"whichever of recall and retention stands lower against its floor), and it {saving}" if ties else
             f"it loses the least of what the agent used and {saving}")
    said_above = best in entries[:3]  # (what it loses is among the reasons: not said twice)
    text = said_once(f"No policy passes the guard ({reasons}). If you must compact, use {best.label}: of the "
                      f"policies that fit the window {keeps}" + ("; what it loses is said above." if said_above else
                                                                 f", but {guard.loses(best) or guard.why_not(best)}."))
    runner = next((e for e in entries if e is not best), None)
    return Verdict(entries, best.label, runner.label if runner else None, text, margin, no_refs,
                   list(sweep_keys), reference, *floors, passes=False)


def _trade_offs(best: Entry, above: list[Entry], runner: Entry | None, guard: _Guard) -> list[str]:
    """A sentence for each policy that saved more than the pick and did not pass: a trade-off where
    it only loses more of what the agent used, else why it was refused."""
    out = []
    for e in above:
        if guard.loses(e) is not None and guard.fatal(e) is None:  # a trade-off, not a refusal
            out.append(f"{'The runner-up: if' if e is runner else 'If'} you accept keeping {_pct(e.recall)} of what "
                       f"the agent later used and {_pct(e.retention)} of the referenced results, {e.label} saves "
                       f"{_gap(e.cost_saving, best.cost_saving)} more.")
        else:
            out.append(f"{'The runner-up, ' if e is runner else ''}{e.label} saves {_pct(e.cost_saving)} but lost: "
                       f"{guard.why_not(e)}.")
    return out


def _notes(entries: list[Entry], guard: _Guard, best: Entry, runner: Entry | None, above: bool,
           triggers: dict[str, str] | None, no_refs: bool) -> list[str]:
    """What the reader should know of the whole comparison: the policies that never acted, the
    transcripts no policy fits, a corpus that never fills the window, measures that cannot tell
    the policies apart."""
    ref, text = guard.ref, []
    idle = [e for e in entries if not e.actions and e is not ref and (e is not runner or above)]
    if idle:
        named = ", ".join(f"{e.label} ({(triggers or {})[e.label]})" if e.label in (triggers or {}) else e.label
                          for e in idle)
        text.append(f"{named} never acted on these transcripts (largest context "
                    f"{max(e.peak_tokens for e in entries):,} tokens): there {'it is' if len(idle) == 1 else 'they are'} "
                    "no compaction.")
    unfit = guard.transcripts - guard.fits
    if unfit:
        text.append(f"On {len(unfit)} transcript(s) no policy fits the context window (no compaction overflows there "
                    "too): none of these can help there.")
    if ref is not None and not ref.overflows and best is ref:
        text.append(f"No transcript fills the context window even with no compaction (largest context "
                    f"{ref.peak_tokens:,} tokens): a policy that acts here only trades what the agent used for cost.")
    if not any(e.probes for e in entries):
        # (a policy that acted looked for the probes; one that never acts does not look: nothing to lose)
        text.append("No reply repeats a string first seen in a tool result, so probe recall (1.0 everywhere) does "
                    "not tell the policies apart." if any(e.actions for e in entries) else
                    "No policy acted, so probe recall (1.0 everywhere) does not tell the policies apart.")
    if no_refs:
        text.append("No transcript refers back to an earlier tool result, so retention (1.0 everywhere) "
                    "does not tell the policies apart.")
    return text


TIMING = "summary.timing"


def _timing(entries: list[Entry], sweep_keys: list[str]) -> list[str]:
    """Where summary.timing was swept: the saving that timing alone brings, per policy and other
    swept values, against compacting at the trigger."""
    if TIMING not in sweep_keys:
        return []
    groups: dict[tuple, dict[str, Entry]] = {}
    for e in entries:
        rest = tuple((k, str(v)) for k, v in sorted(e.swept.items()) if k != TIMING)
        groups.setdefault((e.policy, rest), {})[str(e.swept.get(TIMING))] = e
    out = []
    for (policy, rest), by in groups.items():
        base = by.get("trigger")
        if base is None:
            continue
        best = max((e for t, e in by.items() if t != "trigger"), key=lambda e: e.cost_saving, default=None)
        if best is None:
            continue
        gain = best.cost_saving - base.cost_saving
        if abs(gain) < 0.0005:
            out.append(f"Timing alone changes nothing for {base.label}: no compaction fell where the cache was cold "
                       "or about to be.")
        else:
            out.append(f"Timing alone: {best.label} saves {_pct(abs(gain))} {'more' if gain > 0 else 'less'} of the "
                       f"cost with no compaction than {base.label} (recall {_pct(best.recall)} against "
                       f"{_pct(base.recall)}).")
    return out


def _entries(runs: Sequence[JudgedRun], sweep_keys: list[str], units: dict[str, str] | None
             ) -> tuple[list[Entry], dict[str, set[str]], dict[str, list[JudgedRun]]]:
    """One entry per policy (or swept value), best cost saving first; per entry the transcripts
    where it overflowed the window, and its runs."""
    groups: dict[tuple, list[JudgedRun]] = {}
    for r in runs:
        groups.setdefault((r.policy, *(r.swept.get(k) for k in sweep_keys)), []).append(r)
    entries, overflowed, grouped = [], {}, {}
    for (policy, *values), group in groups.items():
        swept = dict(zip(sweep_keys, values))
        summaries = [r.summary for r in group]
        per = [_saving(s) for s in summaries]
        label = label_of(policy, swept, units)
        low, high = _interval(summaries)
        p25, _, p75 = statistics.quantiles(per, n=4, method="inclusive") if len(per) > 1 else (per[0],) * 3
        entries.append(Entry(
            label=label, policy=policy, swept=swept, transcripts=len({r.transcript for r in group}),
            totals=metrics.sums(summaries),
            median_saving=round(float(statistics.median(per)), 6), saving_p25=round(float(p25), 6),
            saving_p75=round(float(p75), 6),
            costs_more=sum(dearer(s) for s in summaries),
            peak_tokens=max((int(s.get("peak_tokens", 0)) for s in summaries), default=0),
            actions=int(sum(s.get(a, 0) for s in summaries for a in ACTIONS)),
            saving_low=low, saving_high=high,
        ))
        overflowed[label] = {r.transcript for r in group if r.summary["overflows"] > 0}
        grouped[label] = group
    entries.sort(key=lambda e: -e.cost_saving)
    return entries, overflowed, grouped


def _saving(summary: Mapping[str, Any]) -> float:
    """A run's cost saving against no compaction (results.csv's cost_saving)."""
    return metrics.METRICS["cost_saving"].shown(summary)


def _dearer_overall(e: Entry) -> bool:
    """Whether a policy costs more than no compaction over the corpus beyond a tie: by more than
    ``TIE_SHARE`` and beyond the bootstrap's noise (its whole 95% interval below no saving)."""
    return e.cost_saving < -TIE_SHARE and (e.transcripts < 2 or e.saving_high < 0)


def dearer(summary: Mapping[str, Any]) -> bool:
    """Whether a run cost more than no compaction, beyond a tie (``guard.dearer_than_none``)."""
    return dearer_than_none(summary["cost_usd"], summary["raw_cost_usd"])


def _where_it_saves(runs: list[JudgedRun]) -> str:
    """Where a policy saves and where it costs more, by the transcripts' length in calls."""
    if not runs or any("calls" not in r.summary for r in runs):
        return ""
    saves = [r.summary["calls"] for r in runs if not dearer(r.summary)]
    costs = [r.summary["calls"] for r in runs if dearer(r.summary)]
    if not saves or not costs:
        return ""
    return (f" (it costs no more on {len(saves)} transcript(s) of {int(min(saves)):,} to {int(max(saves)):,} calls, "
            f"more on {len(costs)} of {int(min(costs)):,} to {int(max(costs)):,})")


def _interval(summaries: list[Mapping[str, Any]]) -> tuple[float, float]:
    """The total saving's 95% interval over transcripts: a seeded bootstrap of the corpus (the
    same runs give the same interval); a single transcript's is its saving. Drawn by the native
    core where it runs (``_native.bootstrap_interval``: numpy's generator, sums and percentiles to
    the last bit, without importing numpy), else by ``_drawn``, its reference."""
    cost = [float(s["cost_usd"]) for s in summaries]
    raw = [float(s["raw_cost_usd"]) for s in summaries]
    if len(cost) < 2:
        total = sum(raw)
        one = round(1 - sum(cost) / total, 6) if total else 0.0
        return one, one
    native = in_use()
    drawn = native.bootstrap_interval(cost, raw, BOOTSTRAP) if native is not None else None
    low, high = drawn if drawn is not None else _drawn(cost, raw)
    return round(low, 6), round(high, 6)


def _drawn(cost_usd: list[float], raw_usd: list[float]) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles of the total saving over ``BOOTSTRAP`` resamples of the
    transcripts, drawn by numpy's ``default_rng(0)``."""
    import numpy as np

    cost, raw = np.array(cost_usd, float), np.array(raw_usd, float)
    rng = np.random.default_rng(0)
    # the resamples drawn a block at a time (10,000 transcripts at once would be 240 MB of picks):
    # the same stream of draws, so the same interval
    block = max(1, BOOTSTRAP_CELLS // len(cost))
    savings = np.empty(BOOTSTRAP)
    for start in range(0, BOOTSTRAP, block):
        picks = rng.integers(0, len(cost), size=(min(block, BOOTSTRAP - start), len(cost)))
        raws = raw[picks].sum(axis=1)
        savings[start:start + len(picks)] = np.where(raws > 0, 1 - cost[picks].sum(axis=1) / np.where(raws > 0, raws, 1),
                                                     0.0)
    low, high = np.percentile(savings, [2.5, 97.5])
    return float(low), float(high)


def _behind(best: Entry, runner: Entry, reason: str | None) -> str:
    if reason is not None:
        return reason
    gap = best.cost_saving - runner.cost_saving
    if gap > 0:
        return f"it saves {_pct(runner.cost_saving)}, {_gap(best.cost_saving, runner.cost_saving)} less"
    if not best.actions and not runner.actions:
        return (f"it saves as much ({_pct(runner.cost_saving)}): neither ever acted on these transcripts (largest "
                f"context {max(best.peak_tokens, runner.peak_tokens):,} tokens), so both are no compaction here")
    return f"it saves exactly as much ({_pct(runner.cost_saving)}) and comes second in the table's order"


def _praise(e: Entry, transcripts: int, ref: Entry | None) -> str:
    if e is ref or e.cost_saving <= 0:
        return (f"Use {e.label}: no policy costs less than sending the whole history with prompt caching on these "
                f"{transcripts} transcript(s) while keeping what the agent later used.")
    where = f" and costs more than no compaction on {e.costs_more} of {e.transcripts}" if e.costs_more else ""
    spread = ("" if e.transcripts < 2 else
              f"; 95% interval over the transcripts {_pct(e.saving_low)} to {_pct(e.saving_high)}"
              if e.transcripts >= FEW_FOR_INTERVAL else
              f"; {e.transcripts} transcripts are too few for a 95% interval: a bootstrap over them gives "
              f"{_pct(e.saving_low)} to {_pct(e.saving_high)}")
    return (f"Use {e.label}: it saves {_pct(e.cost_saving)} of the cost over {e.transcripts} transcript(s) "
            f"(median {_pct(e.median_saving)} per transcript{spread}){where}, introduces no violation, keeps "
            f"{_pct(e.retention)} of the referenced tool results and {_pct(e.recall)} of what the agent later used "
            f"(probe recall).")


def _pct(x: float, digits: int = 1) -> str:
    return f"{x * 100:.{digits}f}%"


def _gap(more: float, less: float) -> str:
    """How much more of the cost one saving saves than another, in percentage points ("29.9% less"
    read as a share of the smaller saving), from the savings as they are shown: the difference a
    reader makes of the two figures beside it ("66.6%" and "36.6%": 30.0 points, not 29.9)."""
    return _points((round(more * 100, 1) - round(less * 100, 1)) / 100)  # (rounded as _pct shows them)


def _points(x: float, digits: int = 1) -> str:
    """A difference of two shares, in percentage points ("0.6 points")."""
    return f"{x * 100:.{digits}f} point{'' if round(x * 100, digits) == 1 else 's'}"


def _plain(v: Any) -> Any:
    """A numpy scalar as the Python value (for JSON and labels)."""
    return v.item() if hasattr(v, "item") else v

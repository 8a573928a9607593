"""``compactlab tune`` (#20 §2): search a base policy's parameters for the Pareto front of cost
saving against probe recall (or any summary metrics named), across a corpus.

The search is Optuna's (multi-objective TPE by default, NSGA-II on request; seeded), its study
kept in Optuna's journal storage under the output folder (``OUT/study.journal``), so that a tune can be interrupted,
resumed (``--resume``) and inspected with ``optuna-dashboard OUT/study.journal``. A trial is
a policy: the base with the trial's values set; it is replayed on every transcript by workers that
each keep a fixed share of the corpus (``shares.SharePool``: each transcript read once per worker,
the command's process holding run summaries only; on a Dask cluster, by compare's Dask jobs), and
its objectives are the corpus totals (saving over all the transcripts, recall over all the
probes). A trial that introduces more violations than allowed, or overflows a window, is
infeasible (Optuna's constraints: it never joins the front).
"""

from __future__ import annotations

import math
import os
import stat
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

import orjson

from .. import metrics
from ..errors import PolicyError, UsageError, cannot_write
from ..engine.policy import UNKNOWN, Policy, acted_by_layer, idle_keys, load_policy, parse_override, value_at
from ..plumbing.outputs import refuse_inputs
from .guard import Candidate, dearer_than_none, pick
from .verdict import RETENTION_MARGIN

def direction(objective: str) -> Literal["maximize", "minimize"]:
    """Which way an objective (metrics.OBJECTIVES: what each is, over the corpus) is optimised."""
    return "maximize" if metrics.OBJECTIVES[objective].better == "higher" else "minimize"


def column(objective: str) -> str:
    """The name of an objective in the front's columns: its metric's."""
    m = metrics.OBJECTIVES.get(objective)
    return m.name if m is not None else objective
STUDY = "compactlab-tune"


@dataclass(frozen=True)
class Param:
    """A searched key: an int or float range (log scale or not), or a list of choices."""

    key: str
    kind: str  # int | float | choice
    low: float = 0
    high: float = 0
    log: bool = False
    choices: tuple[Any, ...] = ()

    def suggest(self, trial: Any) -> Any:
        if self.kind == "int":
            return trial.suggest_int(self.key, int(self.low), int(self.high), log=self.log)
        if self.kind == "float":
            return trial.suggest_float(self.key, self.low, self.high, log=self.log)
        return trial.suggest_categorical(self.key, list(self.choices))

    def holds(self, value: Any) -> bool:
        """Whether ``value`` is one this key's space can suggest (a study file edited by hand or
        damaged may hold any other)."""
        if self.kind == "choice":
            return any(type(value) is type(c) and value == c for c in self.choices)
        if type(value) is not (int if self.kind == "int" else float) and not (self.kind == "float" and type(value) is int):
            return False
        return self.low <= value <= self.high

    def __str__(self) -> str:
        if self.kind == "choice":
            return f"{self.key} in {{{', '.join(map(str, self.choices))}}}"
        return f"{self.key} {self.kind} {self.low:g}..{self.high:g}{' (log)' if self.log else ''}"


def _untyped(policy: Policy) -> bool:
    """Whether the policy's own step declares no settings dataclass (a step in another process never does)."""
    from ..engine.layers.custom import load_step

    return load_step(policy.custom.call).settings_type is None


def _choices(item: str, key: str, spec: str) -> tuple[Param, list[Any]]:
    """``KEY=A|B|C``: the choices, each read as --set reads a value."""
    choices = tuple(parse_override(f"{key}={c.strip()}")[1] for c in spec.split("|") if c.strip())
    if not choices:
        raise UsageError(f"--space {item!r}: no choice between the |", hint="e.g. --space snip.pair_safe=true|false")
    return Param(key, "choice", choices=choices), list(choices)


def _range(item: str, key: str, spec: str, whole: bool) -> tuple[Param, list[Any]]:
    """``KEY=LO:HI`` or ``KEY=LO:HI:log``: a range of whole numbers (``whole``) or of numbers."""
    parts = spec.split(":")
    log = parts[-1].strip() == "log"
    if log:
        parts = parts[:-1]
    if len(parts) != 2:
        raise UsageError(f"--space {item!r}: a range is LO:HI (or LO:HI:log)")
    try:
        lo, hi = (float(p) for p in parts)
    except ValueError:
        raise UsageError(f"--space {item!r}: LO and HI must be numbers") from None
    if whole and not (lo.is_integer() and hi.is_integer()):
        raise UsageError(f"--space {key}: the key takes whole numbers; got {spec}")
    if not lo < hi:
        raise UsageError(f"--space {key}: LO must be below HI; got {spec}")
    if log and lo <= 0:
        raise UsageError(f"--space {key}: a log scale needs LO > 0; got {spec}")
    return Param(key, "int" if whole else "float", lo, hi, log), [int(lo), int(hi)] if whole else [lo, hi]


def parse_space(items: list[str], base: str, overrides: list[str]) -> list[Param]:
    """``KEY=LO:HI`` (an int or float range; ``:log`` after it for a log scale) or
    ``KEY=A|B|C`` (choices), each checked against the policy schema: the key must exist, its
    type fit, and both ends (every choice) be values the schema accepts."""
    base_policy = load_policy(base, overrides)
    current = base_policy.resolved()
    params: list[Param] = []
    for item in items:
        key, sep, spec = item.partition("=")
        key = key.strip()
        if not sep or not spec.strip():
            raise UsageError(f"--space {item!r}: expected KEY=LO:HI, KEY=LO:HI:log or KEY=A|B|C",
                             hint="e.g. --space summary.trigger=40000:200000 --space micro.keep_by=results|turns")
        value = value_at(base_policy, current, key)
        if value is UNKNOWN:
            if key.startswith("custom.settings.") and base_policy.custom.enabled and _untyped(base_policy):
                raise PolicyError(f"--space {key}: unknown key: the step {base_policy.custom.call} declares no "
                                  "settings, so only those its policy gives a value are searched",
                                  hint=f"give it one: --set {key}=VALUE, or a [custom.settings] table")
            raise PolicyError(f"--space {key}: unknown key", hint="see compactlab policies show " + base)
        if key in {p.key for p in params}:
            raise UsageError(f"--space {key}: given twice")
        if "|" in spec or isinstance(value, (bool, str)):
            param, ends = _choices(item, key, spec)
        else:
            param, ends = _range(item, key, spec, isinstance(value, int))
        for end in ends:  # the schema's bounds, types and cross-field rules, as --set checks them
            try:
                load_policy(base, [*overrides, (key, end)])
            except PolicyError as exc:
                raise PolicyError(f"--space {key}: {end!r} is out of the schema's range: {exc.message}") from None
        params.append(param)
    if not params:
        raise UsageError("tune needs at least one --space KEY=LO:HI")
    return params


def parse_objectives(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in metrics.OBJECTIVES]
    if not names or bad or len(set(names)) != len(names):
        raise UsageError(f"--objective {text!r}: name 1 to 4 of {', '.join(metrics.OBJECTIVES)}, each once")
    return names


def totals(summaries: list[Any]) -> dict[str, float]:
    """A candidate's objectives and constraints over the corpus (the summaries of its runs):
    metrics.totals, by objective name."""
    summed = metrics.sums(summaries)
    return {**{name: getattr(summed, m.name) for name, m in metrics.OBJECTIVES.items()},
            "violations": summed.violations_introduced, "overflows": summed.overflows,
            "cost_usd": summed.cost_usd, "raw_cost_usd": summed.raw_cost_usd, "probes": summed.probes}


#: the scores a suggestion is held to, shown beside the objectives (#55 §3)
GUARDED = ("cost", "recall", "retention")


@dataclass
class Point:
    """A trial (or the base policy) and what it scored."""

    number: int  # the trial's number; -1 for the base policy
    values: dict[str, Any]
    scores: dict[str, float]
    feasible: bool = True
    acted: dict[str, int] | None = None  # how often each layer acted over the corpus (None: not known)


@dataclass
class TuneResult:
    base: str
    params: list[Param]
    objectives: list[str]
    base_point: Point
    points: list[Point]  # every finished trial, in order
    front: list[Point]  # the feasible Pareto front, best first objective first
    interrupted: KeyboardInterrupt | None = None
    failures: list[str] = field(default_factory=list)
    recommendation: str = ""
    notes: list[str] = field(default_factory=list)  # searched keys that changed nothing
    #: no compaction on the same corpus with the same settings: the floors and the cost every
    #: suggestion is held to (None: not run; recall and retention 1.0)
    reference: Point | None = None
    #: what the recommendation names: a front point, the base, no compaction (the reference), or
    #: None (nothing qualifies)
    chosen: Point | None = None
    #: the harness whose settings were searched (``harness_settings``), and the setting to paste
    harness: str | None = None
    paste: list[str] = field(default_factory=list)
    #: with a harness: your current setting of it, in words with its source (the base is set to it)
    current: str | None = None

    def shown(self) -> list[str]:
        """The objectives, then what every suggestion is held to (cost saving, recall, retention)."""
        return [*self.objectives, *(o for o in GUARDED if o not in self.objectives)]

    def front_rows(self) -> list[dict[str, Any]]:
        return [{"point": i + 1, "trial": p.number, **p.values,
                 **{column(o): round(p.scores[o], 6) for o in self.shown() if o in p.scores},
                 "cost_usd": round(p.scores["cost_usd"], 6), "violations": int(p.scores["violations"]),
                 "overflows": int(p.scores["overflows"])} for i, p in enumerate(self.front)]


def pareto(study: Any, points: list[Point], objectives: list[str]) -> list[Point]:
    """The front: Optuna's ``best_trials`` (the feasible trials no other feasible trial dominates,
    the constraints set per trial honoured), one point per score, the first objective's best first."""
    best = _front_numbers(study, {p.number for p in points})
    front, seen = [], set()
    for p in points:
        key = tuple(round(p.scores[o], 9) for o in objectives)
        if p.number in best and p.feasible and key not in seen:
            seen.add(key)
            front.append(p)
    return sorted(front, key=lambda p: tuple(-p.scores[o] for o in objectives))


def _front_numbers(study: Any, numbers: set[int]) -> set[int]:
    """The numbers of the trials on the feasible Pareto front of the trials ``numbers`` (those with
    values the space could suggest: a forged trial outside it must not push real ones off), by
    Optuna's own rule (its ``best_trials``, on those trials alone)."""
    try:
        from optuna.study._multi_objective import _get_pareto_front_trials_by_trials
    except ImportError:  # (a private helper: should a release move it, every trial counts as before)
        return {t.number for t in study.best_trials}
    trials = [t for t in study.get_trials(deepcopy=False) if t.number in numbers]
    return {t.number for t in _get_pareto_front_trials_by_trials(trials, study.directions, consider_constraint=True)}


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
        return (f"No candidate qualifies: every one of the {len(result.points)} trials introduced a violation or "
                f"overflowed a window. Keep {result.base}, or widen the space.")
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


def _beating(result: TuneResult, judge: _Judge) -> list[str]:
    """A front point that beats the base on every objective but falls below the floor: said, and why
    it is not recommended."""
    objs, base = result.objectives, result.base_point
    beating = [p for p in result.front if all(p.scores[o] >= base.scores[o] for o in objs)
               and any(p.scores[o] > base.scores[o] for o in objs) and not judge.guarded(p)]
    if not beating:
        return []
    p = beating[0]
    return [f"Front point {result.front.index(p) + 1} ({_values(p, result.harness)}) beats {result.base} on "
            f"every objective but keeps {_pct(p.scores.get('recall', 1.0))} of what the agent later used and "
            f"{_pct(p.scores.get('retention', 1.0))} of the referenced results: below the floor of {judge.floors} "
            f"(no compaction's less the {judge.margin * 100:.0f}-point margin), so it is not recommended."]


def _chosen_sentence(result: TuneResult, judge: _Judge, point: Point | None, bar: bool) -> str:
    """What to use: no point, no compaction, the base as it is, or a front point."""
    base, floors, margin = result.base_point, judge.floors, judge.margin
    if point is None:
        return (f"None of them keeps recall and retention above the floor of {floors} (no compaction's less "
                f"the {margin * 100:.0f}-point margin): keep the base, or widen the space.")
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
        return (f"Use front point {n} ({values}): {said(point)}, against {said(base)} for {result.base} as it is -- as "
                f"good or better on every objective, with "
                f"{f'{broken} violation(s), within --max-violations,' if broken else 'no violation'} and no "
                f"overflow; its policy is policies/front-{n:02d}.toml.")
    return (f"No point beats {result.base} as it is ({said(base)}) on every objective at once. Of the points that keep "
            f"recall and retention above the floor of {floors}{' and cost no more than no compaction' if bar else ''}, "
            f"front point {n} ({values}) saves the most: {said(point)}; its policy is policies/front-{n:02d}.toml.")


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


def _word(objective: str) -> str:
    return {"cost": "saves", "recall": "recall", "retention": "retention", "reduction": "tokens saved"}[objective]


def _pct(x: float) -> str:
    return f"{x * 100:.1f}%"


#: the study's file: Optuna's journal (an append-only log of JSON lines: a trial costs an append,
#: where SQLite's storage cost a committed transaction per attribute, 4.8x the time; docs/tune.md)
JOURNAL = "study.journal"
#: held (flock) while a tune runs on the study of its --out: one tune per study at a time
LOCK = "study.lock"
#: what a tune writes in its --out (reports/tune_report.py: the front, its policies, the chart)
WRITTEN = (JOURNAL, LOCK, "front.csv", "front.json", "policies", "charts")


def study_path(out_dir: str) -> str:
    """The study file of ``out_dir``: its journal."""
    return os.path.join(out_dir, JOURNAL)


def storage_of(path: str) -> Any:
    """Optuna's storage of a study journal."""
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock

    return JournalStorage(JournalFileBackend(path, lock_obj=JournalFileOpenLock(path + ".optuna-lock")))


def dashboard_command(path: str) -> str:
    """How optuna-dashboard opens the study."""
    return f"optuna-dashboard {path}"


@dataclass(frozen=True)
class StudyDefinition:
    """What makes two tunes the same study, kept in the study's own attributes: a ``--resume``
    whose definition differs is refused, so that one study never mixes trials of two searches."""

    base: str
    fingerprint: str  # of the base policy with --set applied
    overrides: tuple[str, ...]
    space: tuple[str, ...]
    objectives: tuple[str, ...]
    max_violations: int
    corpus: tuple[str, ...]  # the transcripts' content hashes, sorted

    @classmethod
    def of(cls, base: str, overrides: list[str], params: list[Param], objectives: list[str], max_violations: int,
           content_hashes: list[str]) -> "StudyDefinition":
        return cls(base, load_policy(base, overrides).fingerprint, tuple(overrides), tuple(str(p) for p in params),
                   tuple(objectives), max_violations, tuple(sorted(content_hashes)))

    def attrs(self) -> dict[str, Any]:
        return {"definition": {k: list(v) if isinstance(v, tuple) else v for k, v in self.__dict__.items()}}

    def differences(self, stored: Any) -> list[str]:
        """What differs from the definition a study stored (every key, when it stored none)."""
        if not isinstance(stored, dict):
            return ["the study records no definition (not made by this version of compactlab tune)"]
        words = {"base": "base policy", "fingerprint": "base policy's keys (its fingerprint)", "overrides": "--set",
                 "space": "--space", "objectives": "--objective", "max_violations": "--max-violations",
                 "corpus": "transcripts (their content)"}
        out = []
        for key, word in words.items():
            mine = getattr(self, key)
            theirs = stored.get(key)
            if (list(mine) if isinstance(mine, tuple) else mine) != theirs:
                if key == "corpus" and isinstance(theirs, list):
                    out.append(f"{word}: {len(set(mine) - set(theirs))} not in the study, "
                               f"{len(set(theirs) - set(mine))} of the study's missing")
                elif key == "fingerprint" and stored.get("base") == self.base and stored.get("overrides") == list(
                        self.overrides):
                    out.append(f"{word}: the preset changed since the study began")
                elif key != "fingerprint":
                    out.append(f"{word}: {_shown(theirs)} in the study, {_shown(mine)} now")
        return out


def _shown(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        return "(" + ", ".join(map(str, v)) + ")" if v else "(none)"
    return repr(v)


#: the largest study journal read to check it (200 trials are about 400 KB)
MAX_JOURNAL_BYTES = 1 << 30


def study_problem(path: str) -> str | None:
    """Why ``path`` is not a study this command may open, or None: a symlink, anything but a
    regular file, a file that is not a journal of JSON lines that begins with this command's
    study, or a damaged one. Read without being modified."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot read it: {exc.strerror or exc}"
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link: refusing to follow it out of --out"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    return _journal_problem(path, st.st_size)


#: the longest line of a study journal (a trial's record is a few KB)
MAX_JOURNAL_LINE = 16 << 20


def _journal_problem(path: str, size: int) -> str | None:
    """Why the journal at ``path`` is not this command's study, or is damaged, or None: read a
    line at a time (never the whole file at once: a sparse GiB is refused at its first line), each
    line an operation of Optuna's, the first one creating this study; then replayed by Optuna on
    a copy (a missing key, an unknown operation, a bad distribution or trial state), so that a
    damaged study is refused before anything writes to it."""
    if size == 0:
        return "an empty file, not a study journal"
    if size > MAX_JOURNAL_BYTES:
        return f"larger than {MAX_JOURNAL_BYTES >> 30} GiB, not a study journal"
    n = 0
    try:
        with open(path, "rb") as f:
            while True:
                line = f.readline(MAX_JOURNAL_LINE + 1)
                if not line:
                    break
                if not line.endswith(b"\n"):
                    if len(line) > MAX_JOURNAL_LINE:
                        return (f"a damaged study journal (line {n + 1} is longer than {MAX_JOURNAL_LINE >> 20} MiB)"
                                if n else "not an Optuna study journal")
                    break  # (a last line cut by a kill is Optuna's to skip)
                n += 1
                try:
                    op = orjson.loads(line)
                except orjson.JSONDecodeError:
                    return f"a damaged study journal (line {n} is not JSON)" if n > 1 else "not an Optuna study journal"
                if not isinstance(op, dict) or "op_code" not in op:
                    return "not an Optuna study journal" if n == 1 else f"a damaged study journal (line {n})"
                if n == 1 and (op.get("op_code") != 0 or op.get("study_name") != STUDY):
                    return f"an Optuna journal without a {STUDY} study as its first"
    except OSError as exc:
        return f"cannot read it: {exc.strerror or exc}"
    if not n:
        return "not an Optuna study journal"
    return _replay_problem(path)


def _cut_partial_line(path: str) -> None:
    """Cut a last line a killed tune left half written (no newline after it): Optuna skips it when
    it reads the journal, but the next write would follow it on the same line and damage both."""
    from ..plumbing.interrupts import deferred

    with open(path, "rb+") as f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return
        end = size
        while end > 0:
            start = max(0, end - (1 << 16))
            f.seek(start)
            block = f.read(end - start)
            cut = block.rfind(b"\n")
            if cut >= 0:
                with deferred():
                    f.truncate(start + cut + 1)
                return
            end = start


def _replay_problem(path: str) -> str | None:
    """What Optuna says of the journal replayed whole, on a copy (the file itself is not opened for
    writing), or None."""
    import shutil
    import tempfile
    import warnings

    import optuna

    with tempfile.TemporaryDirectory(prefix="compactlab-study-check-") as folder:
        copy = os.path.join(folder, "study.journal")
        shutil.copyfile(path, copy)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                study = optuna.load_study(storage=storage_of(copy), study_name=STUDY)
                for t in study.get_trials(deepcopy=False):
                    t.params, t.distributions, t.state, t.values  # noqa: B018 (each read: each checked)
        except Exception as exc:  # (whatever Optuna raises on a damaged log: it is refused, not run)
            return f"a damaged study journal (Optuna: {type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''})"
    return None


class StudySite:
    """The study in ``OUT/study.journal``, opened safely: checked before anything is created, locked
    (``study.lock``: a second tune on the same --out is refused, never mixed in), repaired on
    resume (trials a killed tune left RUNNING are failed), and removed again when this command
    created it and no trial finished (a failed start never blocks the rerun)."""

    def __init__(self, out_dir: str, resume: bool, force: bool, inputs: list[str] | tuple[str, ...] = ()) -> None:
        self.out_dir, self.resume, self.force, self.inputs = out_dir, resume, force, inputs
        self.path = study_path(out_dir)
        self._lock: Any = None
        self._made: list[str] = []  # what this command created: the folders, the study file
        self.check()

    def check(self) -> None:
        """Refuse (UsageError, nothing created or changed) a --out or study journal that cannot be used."""
        out, path = self.out_dir, self.path
        if os.path.islink(out) and not os.path.exists(out):
            raise UsageError(f"--out {out}: a symbolic link to nothing")
        if os.path.exists(out) and not os.path.isdir(out):
            raise UsageError(f"--out {out}: exists and is not a folder")
        exists = os.path.lexists(path)
        problem = study_problem(path)
        if problem is not None:
            raise UsageError(f"{path}: {problem}: not used, not changed",
                             hint="choose another --out, or move that file away")
        for name in WRITTEN:  # (written in place: never through a link planted in --out, never over an input)
            if os.path.islink(os.path.join(out, name)):
                raise UsageError(f"--out {out}: {name} is a symbolic link: refusing to write through it",
                                 hint="remove it, or choose another --out")
            refuse_inputs(os.path.join(out, name), "--out", self.inputs)
        if self.resume and not exists:
            raise UsageError(f"--resume: no study to resume in {out}/ ({JOURNAL})")
        if not self.resume and exists and not self.force:
            raise UsageError(f"{path} holds a study", hint="continue it with --resume, or start anew with --force")

    def open(self, definition: StudyDefinition, sampler: str, seed: int) -> Any:
        """Create (or, resuming, load) the study under the lock; its definition checked."""
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        try:
            self._folders()
            self._take_lock()
        except OSError as exc:
            self.close(keep=False)
            raise cannot_write(f"--out {self.out_dir}: cannot write", exc) from None
        try:
            self.check()  # again, under the lock: another tune may have made it meanwhile
            if self.resume:
                _cut_partial_line(self.path)  # (what a killed tune left half written: appended to, it would
                #                                 be a damaged line in the middle)
            if self.force and not self.resume and os.path.exists(self.path):
                os.remove(self.path)  # (a study of this command: check() refused anything else)
            if not os.path.exists(self.path):
                self._made.append(self.path)
            samplers = {"tpe": lambda: optuna.samplers.TPESampler(seed=seed, multivariate=True),
                        "nsga2": lambda: optuna.samplers.NSGAIISampler(seed=seed)}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", category=optuna.exceptions.ExperimentalWarning)
                if self.resume:  # (loading writes nothing: a refused resume leaves the study as it was)
                    study = optuna.load_study(storage=storage_of(self.path), study_name=STUDY,
                                              sampler=samplers[sampler]())
                else:
                    study = optuna.create_study(storage=storage_of(self.path), study_name=STUDY,
                                                directions=[direction(o) for o in definition.objectives],
                                                sampler=samplers[sampler]())
            if self.resume:
                differs = definition.differences(study.user_attrs.get("definition"))
                if differs:
                    raise UsageError(f"--resume: not the study in {self.out_dir}/: " + "; ".join(differs),
                                     hint="resume with the same transcripts and options, or start anew with --force")
                repair(study)
            for key, value in definition.attrs().items():
                study.set_user_attr(key, value)
            return study
        except OSError as exc:
            self.close(keep=False)
            why = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
            raise UsageError(f"{self.path}: cannot write the study: {why}") from None
        except BaseException:
            self.close(keep=False)
            raise

    def _folders(self) -> None:
        missing, folder = [], os.path.abspath(self.out_dir)
        while not os.path.isdir(folder):
            missing.append(folder)
            folder = os.path.dirname(folder)
        for f in reversed(missing):
            os.mkdir(f)
            self._made.append(f)

    def _take_lock(self) -> None:
        import fcntl

        lock = os.path.join(self.out_dir, LOCK)
        new = not os.path.lexists(lock)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)
        if new:
            self._made.append(lock)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise UsageError(f"{self.path}: another tune is running on this study",
                             hint="wait for it to finish, or choose another --out") from None
        self._lock = fd

    def close(self, keep: bool = True) -> None:
        """Release the lock; ``keep=False`` also removes what this command created (a study that
        has no finished trial, the lock file, the folders)."""
        if not keep:
            for made in reversed(self._made):
                try:
                    os.rmdir(made) if os.path.isdir(made) else os.remove(made)
                except OSError:
                    pass
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None
        self._made = []


def repair(study: Any) -> int:
    """Fail the trials left RUNNING (a tune killed outright): a resume asks anew. How many."""
    import optuna

    from ..plumbing.interrupts import deferred

    running = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
    with deferred():
        for t in running:
            study.tell(t.number, state=optuna.trial.TrialState.FAIL)
    return len(running)


#: failed trials that end a search early (at least as many as --trials): a candidate that fails
#: is failed in the study and the search goes on, but never for ever
MAX_FAILED_TRIALS = 10

#: the scores of each policy (its metrics over the corpus, and "acted": how often each layer acted),
#: or why it failed
Evaluate = Callable[[list[Policy]], list[dict[str, Any] | str]]


def search(study: Any, params: list[Param], objectives: list[str], base: str, overrides: list[str], trials: int,
           batch: int, evaluate: Evaluate, max_violations: int = 0,
           on_trial: Callable[[int], None] | None = None) -> tuple[list[Point], list[str], KeyboardInterrupt | None]:
    """Run trials until the study has ``trials`` finished ones: ask ``batch`` at a time, evaluate
    their policies together, tell the scores in the order asked (the same seed gives the same
    trials). Returns the finished points (earlier ones included), the failures, and the interrupt
    (Ctrl-C, SIGTERM) that stopped it early; the trials it cut short are failed."""
    import optuna

    failures: list[str] = []
    interrupted: KeyboardInterrupt | None = None
    done = len([t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE])
    try:
        while done < trials and len(failures) < max(trials, MAX_FAILED_TRIALS):
            asked = [study.ask() for _ in range(min(batch, trials - done))]
            policies = []
            for trial in asked:
                values = {p.key: p.suggest(trial) for p in params}
                policies.append(load_policy(base, [*overrides, *values.items()]))  # the values as data
            scores = evaluate(policies)
            for trial, score in zip(asked, scores):
                if isinstance(score, str):
                    failures.append(f"trial {trial.number}: {score}")
                    study.tell(trial, state=optuna.trial.TrialState.FAIL)
                    continue
                trial.set_constraint("violations", float(score["violations"] - max_violations))
                trial.set_constraint("overflows", float(score["overflows"]))
                for k, v in score.items():
                    trial.set_user_attr(k, v)
                study.tell(trial, [score[o] for o in objectives])
                done += 1
                if on_trial:
                    on_trial(1)
    except KeyboardInterrupt as stop:
        interrupted = stop
        try:
            repair(study)  # every trial cut short (asked, or being asked): failed, so that a resume asks anew
        except Exception:
            pass  # (the storage itself was cut short: --resume repairs it)
    return points_of(study, params, objectives, failures), failures, interrupted


def points_of(study: Any, params: list[Param], objectives: list[str], refused: list[str] | None = None) -> list[Point]:
    """The finished trials as points; a trial whose values the space could not have suggested (a
    study file edited by hand or damaged) is left out, said in ``refused``: it never becomes a
    front policy."""
    import optuna

    points = []
    for t in study.trials:
        if t.state != optuna.trial.TrialState.COMPLETE:
            continue
        bad = next((p for p in params if p.key not in t.params or not p.holds(t.params[p.key])), None)
        if bad is not None:
            if refused is not None:
                shown = repr(t.params[bad.key])[:40] if bad.key in t.params else "no value"
                refused.append(f"trial {t.number}: {shown} for {bad.key} is outside the searched space "
                               f"({bad}): left out")
            continue
        scores = {k: float(v) for k, v in t.user_attrs.items()
                  if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}
        missing = sorted(({*objectives, "cost_usd", "violations", "overflows"} - scores.keys())
                         | ({"constraints"} if not t.constraints else set()))
        if missing:  # (every finished trial of this command has them: a record lost or damaged)
            if refused is not None:
                refused.append(f"trial {t.number}: no {', '.join(missing)} recorded (a damaged study): left out")
            continue
        feasible = all(c <= 0 for c in t.constraints.values())
        acted = t.user_attrs.get("acted")
        points.append(Point(t.number, {p.key: t.params[p.key] for p in params if p.key in t.params}, scores, feasible,
                            acted if isinstance(acted, dict) else None))
    return points


def _scores(done: Any, n: int, count: int) -> list[dict[str, Any] | str]:
    """Per policy of a batch, its corpus totals (and how often each layer acted), or why it failed."""
    if done.interrupted:
        raise done.interrupted
    by: dict[int, list[Any]] = {}
    for r in done.results:
        by.setdefault(r.job // n, []).append(r.summary)
    failed = {f.job // n: f"{f.name}: {f.reason}" for f in done.failures}
    return [failed[i] if i in failed else {**totals(by[i]), "acted": acted_by_layer(by[i])} for i in range(count)]


def share_evaluator(pool: Any) -> Evaluate:
    """Score policies on workers that each keep a share of the corpus (``shares.SharePool``)."""
    n = len(pool.members)
    return lambda policies: _scores(pool.run(policies), n, len(policies))


def corpus_evaluator(transcripts: list[Any], *, n_jobs: int | None, prices: list[Any], calibrations: list[Any],
                     summarizer: tuple[str, Any] = ("stub", None), executor: str | None = None,
                     keep_recorded_compactions: bool = False, cache_ttl: str | None = None,
                     cache_model: str | None = None, window: int | None = None) -> Evaluate:
    """Score policies on the corpus with compare's workers: every policy x transcript a job."""
    from .compare import Job, run_jobs

    n = len(transcripts)

    def evaluate(policies: list[Policy]) -> list[dict[str, Any] | str]:
        jobs = [Job(i * n + t, t, policy, ()) for i, policy in enumerate(policies) for t in range(n)]
        done = run_jobs(transcripts, jobs, n_jobs=n_jobs, prices=prices, calibrations=calibrations,
                        keep_recorded_compactions=keep_recorded_compactions, summarizer=summarizer,
                        executor=executor, cache_ttl=cache_ttl, cache_model=cache_model, window=window)
        return _scores(done, n, len(policies))

    return evaluate


def tune(params: list[Param], objectives: list[str], base: str, overrides: list[str], open_study: Callable[[], Any],
         trials: int, evaluate: Evaluate, batch: int, max_violations: int = 0,
         on_trial: Callable[[int], None] | None = None, harness: str | None = None,
         current: str | None = None) -> TuneResult:
    """Score the base policy, search, and judge: the whole of a tune but its files. The study is
    opened (``open_study()``) once the base policy has run: a corpus or an executor that cannot
    be used leaves nothing behind."""
    base_policy = load_policy(base, overrides)
    got, none = evaluate([base_policy, load_policy("none")])
    if isinstance(got, str):
        raise UsageError(f"the base policy fails on the corpus: {got}")
    if isinstance(none, str):
        raise UsageError(f"no compaction fails on the corpus: {none}")
    reference = Point(-2, {}, {k: v for k, v in none.items() if k != "acted"},
                      none["violations"] <= max_violations and not none["overflows"])
    resolved = base_policy.resolved()
    base_values = {p.key: value_at(base_policy, resolved, p.key) for p in params}
    base_point = Point(-1, base_values, {k: v for k, v in got.items() if k != "acted"},
                       got["violations"] <= max_violations and not got["overflows"], got.get("acted"))
    study = open_study()
    points, failures, interrupted = search(study, params, objectives, base, overrides, trials, batch, evaluate,
                                           max_violations, on_trial)
    result = TuneResult(base, params, objectives, base_point, points, pareto(study, points, objectives), interrupted,
                        failures, reference=reference)
    result.harness, result.current = harness, current
    result.recommendation = recommend(result)
    if harness is not None and result.chosen is not None:
        from .harness_settings import paste

        chosen = result.chosen
        result.paste = ([f"no change: keep your current setting, {current}"] if chosen is base_point and current else
                        paste(harness, None if chosen is reference else chosen.values, chosen is base_point))
    known = [p.acted for p in (base_point, *points) if p.acted is not None]
    on = [p.key for p in params if getattr(getattr(base_policy, p.key.partition(".")[0], None), "enabled", False)]
    result.notes = idle_keys(base, on, {layer: sum(a.get(layer, 0) for a in known) for a in known[:1] for layer in a},
                             len(known))
    return result

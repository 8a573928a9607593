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
from typing import TYPE_CHECKING, Any, Callable

from .. import metrics
from ..errors import PolicyError, UsageError
from ..engine.policy import UNKNOWN, Policy, acted_by_layer, idle_keys, load_policy, nearest_key, parse_override, value_at
from .recommend import recommend
from .study import repair
from .trials import Param, Point, TuneResult

if TYPE_CHECKING:
    from .compare import Cluster


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
            raise PolicyError(f"--space {key}: unknown key", hint=nearest_key(key.split("."), base))
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
    # (and the costs over the transcripts whose history fits the window, where compare's one rule
    # weighs a cost against no compaction's: ``guard.dearer_where_fits``)
    fits = [s for s in summaries if not _field(s, "raw_overflows")]
    return {**{name: getattr(summed, m.name) for name, m in metrics.OBJECTIVES.items()},
            "violations": summed.violations_introduced, "overflows": summed.overflows,
            "cost_usd": summed.cost_usd, "raw_cost_usd": summed.raw_cost_usd, "probes": summed.probes,
            "refs": summed.refs,
            "fits": len(fits), "cost_usd_where_fits": sum(_field(s, "cost_usd") for s in fits),
            "raw_cost_usd_where_fits": sum(_field(s, "raw_cost_usd") for s in fits)}


def _field(summary: Any, name: str) -> Any:
    """A run summary's field, of the summary or of its dict."""
    return summary.get(name, 0) if isinstance(summary, dict) else getattr(summary, name, 0)


def pareto(study: Any, points: list[Point], objectives: list[str], base: Point | None = None) -> list[Point]:
    """The front: Optuna's ``best_trials`` (the feasible trials no other feasible trial dominates,
    the constraints set per trial honoured), one point per score, the first objective's best first;
    less a point that another of them covers (``covers``), or that the ``base`` as it is covers or
    equals: it improves on nothing a user reads of it (a Gemini CLI tune whose layer never acted
    listed a point with the base's very figures, and its value)."""
    best = _front_numbers(study, {p.number for p in points})
    front, seen = [], set()
    for p in points:
        key = tuple(round(p.scores[o], 9) for o in objectives)
        if p.number in best and p.feasible and key not in seen:
            seen.add(key)
            front.append(p)
    others = [*front, *([base] if base is not None and base.feasible else [])]
    front = [p for p in front if not any(q is not p and covers(q, p, objectives, ties=q is base) for q in others)]
    return sorted(front, key=lambda p: tuple(-p.scores[o] for o in objectives))


def covers(q: Point, p: Point, objectives: list[str], ties: bool = False) -> bool:
    """Whether ``q`` is as good as ``p`` on everything a user reads of a front point and better on
    one (``ties``: or equal on all): its cost, recall, retention (the floors the recommendation
    holds it to) and the other objectives. (Cost exactly, as the one rule orders candidates,
    ``guard.pick``: a point a hundredth of a cent cheaper is the cheaper one there too.)"""
    cost_q, cost_p = q.scores.get("cost_usd"), p.scores.get("cost_usd")
    measures = [m for m in dict.fromkeys([*objectives, "recall", "retention"]) if m != "cost"]
    if cost_q is None or cost_p is None or any(m not in q.scores or m not in p.scores for m in measures):
        return False
    if cost_q > cost_p or any(q.scores[m] < p.scores[m] for m in measures):
        return False
    return ties or cost_q < cost_p or any(q.scores[m] > p.scores[m] for m in measures)


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


#: failed trials that end a search early (at least as many as --trials): a candidate that fails
#: is failed in the study and the search goes on, but never for ever
MAX_FAILED_TRIALS = 10


#: the scores of each policy (its metrics over the corpus, and "acted": how often each layer acted),
#: or why it failed
Evaluate = Callable[[list[Policy]], list[dict[str, Any] | str]]
#: a batch of policies sent to be scored (``Evaluate.submit``, where an evaluator has one), and what
#: waits for its scores
Scores = Callable[[], list[dict[str, Any] | str]]

#: the batches a search has out at once: the next is asked (and runs) while the last is scored, so
#: that the workers never wait for the sampler, nor the sampler for the slowest worker
IN_FLIGHT = 2
#: the trials asked at a time: fixed, not the workers' number, so that a seed asks the same trials
#: whatever the machine and ``--jobs`` (a worker runs its share of the corpus for every trial of a
#: batch, so the workers are kept busy by the shares, not by the batch's size). 2, 4 and 8 took
#: the same time on two cores (a tune of 200 trials x 20 sessions: 11.5-12.7 s each)
BATCH = 4


class _Scored:
    """A batch scored when it was sent (an evaluator without ``submit``): its scores, kept."""

    def __init__(self, scores: list[dict[str, Any] | str]) -> None:
        self.scores = scores

    def __call__(self) -> list[dict[str, Any] | str]:
        return self.scores


def _submit(evaluate: Evaluate, policies: list[Policy]) -> Scores:
    """Send ``policies`` to be scored: ``evaluate.submit`` where it has one (the work runs while the
    caller goes on), else scored now."""
    submit = getattr(evaluate, "submit", None)
    return submit(policies) if submit is not None else _Scored(evaluate(policies))


def search(study: Any, params: list[Param], objectives: list[str], base: str, overrides: list[str], trials: int,
           evaluate: Evaluate, max_violations: int = 0, on_trial: Callable[[int], None] | None = None,
           batch: int = BATCH) -> tuple[list[Point], list[str], KeyboardInterrupt | None]:
    """Run trials until the study has ``trials`` finished ones: ask ``batch`` at a time and evaluate
    their policies together, ``IN_FLIGHT`` batches out at once (the next batch asked before the last
    one is told, whatever the evaluator: the same seed gives the same trials on every path); tell
    the scores in the order asked. Returns the finished points (earlier ones included), the
    failures, and the interrupt (Ctrl-C, SIGTERM) that stopped it early; the trials it cut short are
    failed (a batch already scored is told first)."""
    import optuna

    failures: list[str] = []
    interrupted: KeyboardInterrupt | None = None
    done = len([t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE])
    flying: list[tuple[list[Any], Scores]] = []  # the batches out, oldest first

    def tell(asked: list[Any], scores: list[dict[str, Any] | str]) -> None:
        nonlocal done
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

    try:
        while True:
            while len(flying) < IN_FLIGHT and len(failures) < max(trials, MAX_FAILED_TRIALS):
                out = sum(len(asked) for asked, _ in flying)
                if done + out >= trials:
                    break
                asked = [study.ask() for _ in range(min(batch, trials - done - out))]
                policies = []
                for trial in asked:
                    values = {p.key: p.suggest(trial) for p in params}
                    policies.append(load_policy(base, [*overrides, *values.items()]))  # the values as data
                flying.append((asked, _submit(evaluate, policies)))
            if not flying:
                break
            asked, scores = flying[0]
            tell(asked, scores())
            flying.pop(0)
    except KeyboardInterrupt as stop:
        interrupted = stop
        try:
            for asked, scores in flying:  # (a batch scored when it was sent: told, as it would have been)
                if not isinstance(scores, _Scored):
                    break
                tell(asked, scores())
        except Exception:
            pass
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


class _ShareEvaluator:
    """Score policies on workers that each keep a share of the corpus (``shares.SharePool``): at
    once, or sent (``submit``) and scored when asked, the workers running it meanwhile."""

    def __init__(self, pool: Any) -> None:
        self.pool, self.n = pool, len(pool.members)

    def __call__(self, policies: list[Policy]) -> list[dict[str, Any] | str]:
        return _scores(self.pool.run(policies), self.n, len(policies))

    def submit(self, policies: list[Policy]) -> Scores:
        sent = self.pool.submit(policies)
        return lambda: _scores(self.pool.collect(sent), self.n, len(policies))


def share_evaluator(pool: Any) -> Evaluate:
    """Score policies on workers that each keep a share of the corpus (``shares.SharePool``)."""
    return _ShareEvaluator(pool)


def corpus_evaluator(transcripts: list[Any], *, n_jobs: int | None, prices: list[Any], calibrations: list[Any],
                     summarizer: tuple[str, Any] = ("stub", None), executor: "str | Cluster | None" = None,
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
         trials: int, evaluate: Evaluate, max_violations: int = 0,
         on_trial: Callable[[int], None] | None = None, harness: str | None = None,
         current: str | None = None, batch: int = BATCH, no_off: str | None = None) -> TuneResult:
    """Score the base policy, search, and judge: the whole of a tune but its files. The study is
    opened (``open_study()``) once the base policy has run: a corpus or an executor that cannot
    be used leaves nothing behind. ``no_off``: why no compaction cannot be set on these sessions,
    where their versions say so (``TuneResult.no_off``)."""
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
    points, failures, interrupted = search(study, params, objectives, base, overrides, trials, evaluate,
                                           max_violations, on_trial, batch)
    result = TuneResult(base, params, objectives, base_point, points, pareto(study, points, objectives, base_point),
                        interrupted, failures, reference=reference)
    result.harness, result.current, result.no_off = harness, current, no_off
    result.recommendation = recommend(result)
    if harness is not None and result.chosen is not None:
        result.paste, result.nothing_to_set = to_paste(harness, result.chosen, result)
    known = [p.acted for p in (base_point, *points) if p.acted is not None]
    on = [p.key for p in params if getattr(getattr(base_policy, p.key.partition(".")[0], None), "enabled", False)]
    named = None
    if harness is not None:  # (its own settings' names, as its table and its line to paste say them)
        from .harness_settings import harness as harness_named

        named = {k.key: k.setting for k in harness_named(harness).knobs}
    result.notes = idle_keys(base, on, {layer: sum(a.get(layer, 0) for a in known) for a in known[:1] for layer in a},
                             len(known), named)
    return result


def to_paste(harness: str, chosen: Point, result: TuneResult) -> tuple[list[str], str | None]:
    """What ``tune --harness`` prints of the point it recommends: the harness's setting to paste
    (no compaction: the setting that turns it off), or, where the point is the base, why there is
    none to make (your current setting, or the harness's default; a harness always told its
    setting, as OpenCode's preset differs from its default, gets the lines)."""
    from .harness_settings import harness as harness_of, paste

    h = harness_of(harness)
    if chosen is result.base_point and result.current:
        return [], f"keep your current setting, {result.current}"
    if chosen is result.base_point and not h.always_set:
        return [], f"the point recommended is {h.title}'s default"
    return paste(harness, None if chosen is result.reference else chosen.values), None

"""Properties of the verdict (#43 §4), under hypothesis: the floors are no compaction's recall and
retention less the margin (computed here from none's runs, not read from the verdict), adding a
policy that another dominates never changes the pick, and the pick does not depend on the order
the policies are listed in."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings, strategies as st

from compactlab.corpus.verdict import judge

from test_verdict import Judged
from helpers import examples


TRANSCRIPTS = ("a", "b", "c")


def _run(transcript: str, policy: str, raw: float, cost: float, refs: int, retained: int, probes: int, kept: int,
         violations: int, overflows: int) -> Judged:
    return Judged(transcript, policy, {}, {
        "transcript": transcript, "policy": policy, "calls": 10, "cost_usd": cost, "raw_cost_usd": raw,
        "tokens_total": int(cost * 1000), "raw_tokens_total": int(raw * 1000), "refs": refs,
        "refs_retained": retained, "probes": probes, "probes_kept": kept, "violations_introduced": violations,
        "overflows": overflows, "summaries": 1, "snipped": 1, "peak_tokens": 1000})


@st.composite
def corpora(draw) -> tuple[list[Judged], dict[str, float]]:
    """No compaction and a few policies over three transcripts (no compaction keeps everything)."""
    raw = {t: draw(st.floats(1, 100)) for t in TRANSCRIPTS}
    refs = {t: draw(st.integers(0, 20)) for t in TRANSCRIPTS}
    probes = {t: draw(st.integers(0, 40)) for t in TRANSCRIPTS}
    none_overflows = draw(st.sampled_from([0, 0, 1]))
    runs = [_run(t, "none", raw[t], raw[t], refs[t], refs[t], probes[t], probes[t], 0,
                 none_overflows if t == "c" else 0) for t in TRANSCRIPTS]
    for i in range(draw(st.integers(1, 4))):
        for t in TRANSCRIPTS:
            runs.append(_run(t, f"p{i}", raw[t], raw[t] * draw(st.floats(0.05, 1.5)), refs[t],
                             draw(st.integers(0, refs[t])), probes[t], draw(st.integers(0, probes[t])),
                             draw(st.sampled_from([0, 0, 0, 1])), draw(st.sampled_from([0, 0, 0, 2]))))
    return runs, raw


def _dominated(runs: list[Judged], by: str) -> list[Judged]:
    """A policy worse than ``by`` on every measure of every transcript (or equal)."""
    out = []
    for r in runs:
        if r.policy == by:
            s = r.summary
            out.append(_run(r.transcript, "dominated", s["raw_cost_usd"], s["cost_usd"] * 1.2 + 0.05, s["refs"],
                            max(0, s["refs_retained"] - 1), s["probes"], max(0, s["probes_kept"] - 1),
                            s["violations_introduced"], s["overflows"]))
    return out


def _table(runs: list[Judged]) -> list[tuple]:
    keys = ("cost_usd", "raw_cost_usd", "refs", "refs_retained", "probes", "probes_kept", "violations_introduced",
            "overflows")
    return [(r.transcript, r.policy, *(r.summary[k] for k in keys)) for r in runs]


SETTINGS = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(corpora(), st.sampled_from([0.0, 0.05, 0.2]))
def test_the_floors_are_no_compactions_less_the_margin(corpus, margin):
    runs, _ = corpus
    v = judge(runs, [], margin=margin, reference="none")
    none = [r.summary for r in runs if r.policy == "none"]
    refs, probes = sum(s["refs"] for s in none), sum(s["probes"] for s in none)
    retention = sum(s["refs_retained"] for s in none) / refs if refs else 1.0
    recall = sum(s["probes_kept"] for s in none) / probes if probes else 1.0
    assert abs(v.recall_floor - (recall - margin)) < 1e-9 and abs(v.retention_floor - (retention - margin)) < 1e-9
    if v.recommended is not None and v.passes:
        pick = next(e for e in v.entries if e.label == v.recommended)
        assert pick.recall >= recall - margin - 1e-9 and pick.retention >= retention - margin - 1e-9
        assert pick.violations_introduced == 0


@SETTINGS
@given(corpora(), st.integers(0, 10_000))
def test_a_dominated_policy_never_changes_the_pick(corpus, seed):
    runs, _ = corpus
    before = judge(runs, [], reference="none")
    policies = sorted({r.policy for r in runs})
    by = random.Random(seed).choice(policies)
    after = judge(runs + _dominated(runs, by), [], reference="none")
    assert (after.recommended, after.passes) == (before.recommended, before.passes), (_table(runs), by,
                                                                                      after.recommendation)


@SETTINGS
@given(corpora(), st.integers(0, 10_000))
def test_the_pick_does_not_depend_on_the_order_of_the_list(corpus, seed):
    runs, _ = corpus
    shuffled = list(runs)
    random.Random(seed).shuffle(shuffled)
    a, b = judge(runs, [], reference="none"), judge(shuffled, [], reference="none")
    assert (a.recommended, a.passes, a.recall_floor, a.retention_floor) == (b.recommended, b.passes, b.recall_floor,
                                                                            b.retention_floor)


@SETTINGS
@given(corpora())
def test_no_policy_that_costs_more_is_named_while_no_compaction_fits(corpus):
    runs, _ = corpus
    v = judge(runs, [], reference="none")
    none_fits = not any(r.summary["overflows"] for r in runs if r.policy == "none")
    if none_fits and v.recommended is not None:
        pick = next(e for e in v.entries if e.label == v.recommended)
        assert pick.cost_saving >= 0 or pick.label == "none"

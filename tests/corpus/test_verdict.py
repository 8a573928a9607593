"""compare's verdict: per policy across the transcripts, then which one to use and why (#18 §1)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactlab import core
from compactlab.corpus.verdict import judge
from helpers import SAMPLES, examples


def run(transcript: str, policy: str, cost: float, raw: float = 10.0, retained: int = 8, refs: int = 10,
        violations: int = 0, overflows: int = 0, **swept) -> dict:
    return {"transcript": transcript, "policy": policy, **swept, "calls": 10, "cost_usd": cost, "raw_cost_usd": raw,
            "cost_saving": 1 - cost / raw, "tokens_total": int(cost * 100), "raw_tokens_total": int(raw * 100),
            "refs": refs, "refs_retained": retained, "violations_introduced": violations, "overflows": overflows,
            "summaries": 1, "probes": 0, "probes_kept": 0}


@dataclass
class Judged:
    """A run as the verdict reads it (compare's RunResult has these fields)."""

    transcript: str
    policy: str
    swept: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)


def frame(rows: list[dict]) -> list[Judged]:
    """Runs from results.csv-like rows (a swept key has a dot in its name)."""
    return [Judged(r["transcript"], r["policy"], {k: v for k, v in r.items() if "." in k}, r) for r in rows]


def test_the_best_saving_that_breaks_nothing_and_keeps_what_was_used_is_recommended():
    """(#27 §1) No compaction is the reference: a policy is held to its recall and retention, less
    the margin (an absolute share), not to the best of the savers listed."""
    df = frame([run("a", "none", 10, retained=10), run("b", "none", 20, raw=20, retained=10),
                run("a", "cheap-but-broken", 2, violations=2), run("b", "cheap-but-broken", 4, raw=20),
                run("a", "forgetful", 3, retained=2), run("b", "forgetful", 6, raw=20, retained=2),
                run("a", "good", 5, retained=10), run("b", "good", 12, raw=20, retained=9)])
    v = judge(df, [], reference="none")
    assert [e.label for e in v.entries] == ["cheap-but-broken", "forgetful", "good", "none"]
    good = next(e for e in v.entries if e.label == "good")
    assert good.cost_saving == pytest.approx(1 - 17 / 30) and good.median_saving == pytest.approx((0.5 + 0.4) / 2)
    assert good.retention == pytest.approx(19 / 20) and good.transcripts == 2 and good.costs_more == 0
    assert v.retention_floor == pytest.approx(0.95) and v.reference == "none"
    assert v.recommended == "good" and v.runner_up == "cheap-but-broken"
    assert "Use good: it saves 43.3%" in v.recommendation
    assert "The runner-up, cheap-but-broken saves 80.0% but lost: it introduces 2 tool-pairing violation(s)" in v.recommendation
    # forgetful keeps 20% of the referenced results: a trade-off, said as one
    assert "If you accept keeping 100.0% of what the agent later used and 20.0% of the referenced results, " \
           "forgetful saves 26.7 points more." in v.recommendation
    assert judge(df, [], margin=0.85, reference="none").recommended == "forgetful"  # a floor of 15% admits it


def test_a_policy_that_overflows_where_another_fits_is_refused_and_none_is_recommended_when_nothing_saves():
    df = frame([run("a", "none", 10, retained=10, overflows=3), run("a", "dear", 12, retained=10),
                run("a", "even", 10, retained=10)])
    v = judge(df, [], reference="none")
    assert v.recommended == "even" and "no policy costs less" in v.recommendation
    only_none = judge(frame([run("a", "none", 10, overflows=1)]), [], reference="none")
    assert "On 1 transcript(s) no policy fits the context window" in only_none.recommendation
    dearer = judge(frame([run("a", "dear", 12), run("b", "dear", 8)]), []).entries[0]
    assert dearer.costs_more == 1
    # every policy overflows transcript b: there it refuses none of them
    both = judge(frame([run("a", "none", 10, retained=10), run("b", "none", 10, retained=10, overflows=2),
                        run("a", "s", 8, retained=10), run("b", "s", 8, retained=10, overflows=1)]), [],
                 reference="none")
    assert both.recommended == "s"


def test_a_policy_that_costs_more_on_half_the_transcripts_is_not_recommended_for_its_total():
    """(#27 §2) A big saving on one transcript does not carry a policy that costs more on the rest."""
    rows = [run(t, "none", 10, retained=10) for t in "abcd"]
    rows += [run("a", "lumpy", 1, retained=10), run("b", "lumpy", 11, retained=10), run("c", "lumpy", 11, retained=10),
             run("d", "lumpy", 10, retained=10)]
    rows += [run(t, "steady", 9, retained=10) for t in "abcd"]
    v = judge(frame(rows), [], reference="none")
    lumpy = next(e for e in v.entries if e.label == "lumpy")
    assert lumpy.cost_saving > 0.1 and lumpy.costs_more == 2
    assert v.recommended == "steady" and "costs more than no compaction on 2 of its 4 transcripts" in v.recommendation
    assert "(it costs no more on 2 transcript(s) of 10 to 10 calls, more on 2 of 10 to 10)" in v.recommendation
    steady = next(e for e in v.entries if e.label == "steady")
    assert steady.saving_low == steady.saving_high == pytest.approx(0.1)  # the same on every transcript
    assert lumpy.saving_low < lumpy.cost_saving < lumpy.saving_high  # a spread, seeded
    assert judge(frame(rows), [], reference="none").entries == v.entries


def test_when_nothing_passes_the_one_that_loses_least_and_fits_the_window_is_named_with_its_loss():
    df = frame([run("a", "none", 10, retained=10, overflows=2), run("a", "masking", 5, retained=3),
                run("a", "s06", 2, retained=1)])
    v = judge(df, [], reference="none")
    assert v.recommended == "masking" and not v.passes  # not s06, which saves more and keeps less
    assert v.recommendation.startswith("No policy passes the guard (s06: retention 10.0% (the referenced tool "
                                       "results it keeps), 85.0 points under the 95.0% floor (no compaction's 100.0% "
                                       "less the 5-point margin)")
    # (what a measure means and how its floor is made are said once, at the first policy named; the
    # one to use is among the reasons, so its loss is not said again after it)
    assert "; masking: retention 30.0%, 65.0 points under the 95.0% floor" in v.recommendation
    assert v.recommendation.endswith("If you must compact, use masking: of the policies that fit the window it loses "
                                     "the least of what the agent used and saves 50.0%; what it loses is said above.")
    assert v.recommendation.count("(the referenced tool results it keeps)") == 1
    assert v.recommendation.count("less the 5-point margin") == 1


def test_the_one_to_use_past_the_reasons_named_has_its_loss_said_after_it():
    """Only the first three policies' reasons are listed: one to use that saved less than them has
    its loss said after it, its measure's meaning and its floor's making not again."""
    df = frame([run("a", "none", 10, retained=10, overflows=2), run("a", "p1", 1, retained=1),
                run("a", "p2", 2, retained=2), run("a", "p3", 3, retained=3), run("a", "p4", 4, retained=6)])
    v = judge(df, [], reference="none")
    assert v.recommended == "p4" and not v.passes
    assert "; p4:" not in v.recommendation and "(p4:" not in v.recommendation  # (not among the reasons)
    assert v.recommendation.endswith("saves 60.0%, but retention 60.0%, 35.0 points under the 95.0% floor.")
    assert v.recommendation.count("(the referenced tool results it keeps)") == 1


def test_a_tie_of_policies_that_never_acted_says_so():
    rows = [{**run("a", "none", 10, retained=10), "peak_tokens": 65000, "summaries": 0},
            {**run("a", "claude-code", 10, retained=10), "peak_tokens": 65000, "summaries": 0}]
    v = judge(frame(rows), [], reference="none")
    assert "neither ever acted on these transcripts (largest context 65,000 tokens)" in v.recommendation
    assert "No transcript fills the context window even with no compaction" in v.recommendation


def test_a_sweep_ranks_the_swept_values():
    rows = [run("a", "s08", c, retained=10, **{"summary.trigger": t}) for t, c in ((20000, 4), (50000, 3), (100000, 6))]
    v = judge(frame(rows), ["summary.trigger"])
    assert [e.label for e in v.entries] == ["s08 summary.trigger=50000", "s08 summary.trigger=20000",
                                            "s08 summary.trigger=100000"]
    assert v.entries[0].swept == {"summary.trigger": 50000} and v.recommended == "s08 summary.trigger=50000"


def test_without_references_the_verdict_says_retention_tells_nothing():
    v = judge(frame([run("a", "x", 5, refs=0, retained=0), run("a", "y", 6, refs=0, retained=0)]), [])
    assert v.no_references and "retention (1.0 everywhere)" in v.recommendation


def test_compare_leads_with_the_verdict_in_every_report(cli, tmp_path):
    files = [SAMPLES / "synth-small.jsonl", SAMPLES / "synth-medium.jsonl"]
    r = cli("compare", *files, "-p", "none", "-p", "s06", "-p", "claude-code", "--out", tmp_path / "c", "-q")
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("verdict over 2 transcript(s)")
    # none overflows the window on synth-medium; s06 and claude-code lose what was used: none passes
    assert "\nNo policy passes the guard" in r.stdout and "If you must compact, use claude-code" in r.stdout
    assert r.stdout.index("use claude-code") < r.stdout.index("6 runs")
    doc = orjson.loads((tmp_path / "c" / "results.json").read_bytes())
    assert list(doc) == ["verdict", "runs"] and len(doc["runs"]) == 6
    assert doc["verdict"]["recommended"] in {"none", "s06", "claude-code"}
    assert {e["label"] for e in doc["verdict"]["entries"]} == {"none", "s06", "claude-code"}
    md = (tmp_path / "c" / "report.md").read_text()
    assert md.index("## Verdict") < md.index("## Runs") and doc["verdict"]["recommendation"] in md
    html = (tmp_path / "c" / "report.html").read_text()
    assert html.index("Verdict") < html.index("<h2>Runs</h2>")
    printed = orjson.loads(cli("compare", *files, "-p", "none", "-p", "s06", "-p", "claude-code", "--dry-run",
                               "--format", "json").stdout)
    assert printed["verdict"]["recommendation"] == doc["verdict"]["recommendation"]


def test_many_runs_print_the_verdict_and_leave_the_rows_to_the_files(cli, monkeypatch):
    from compactlab.reports import compare_report

    monkeypatch.setattr(compare_report, "MAX_TERMINAL_RUNS", 3)
    r = cli("compare", SAMPLES / "synth-small.jsonl", SAMPLES / "synth-medium.jsonl", "-p", "none", "-p", "s06",
            "--dry-run", "-q")
    assert "4 runs: each is in results.csv" in r.stdout and "synth-small.jsonl" not in r.stdout


def test_a_big_comparison_opens_on_its_verdict_with_the_runs_collapsed(cli, tmp_path, monkeypatch):
    from compactlab.reports import compare_report

    monkeypatch.setattr(compare_report, "OPEN_RUNS", 3)
    out = tmp_path / "c"
    r = cli("compare", SAMPLES / "synth-small.jsonl", SAMPLES / "synth-medium.jsonl", "-p", "none", "-p", "s06",
            "--out", out, "-q", "--charts", "summary")
    assert r.exit_code == 0, r.output
    html = (out / "report.html").read_text()
    assert "<details><summary>4 runs, one row each" in html and html.index("Verdict") < html.index("<details>")
    assert sorted(p.name for p in (out / "charts").iterdir()) == ["pareto.svg", "savings.svg"]  # no transcript's


def test_charts_none_and_all(cli, tmp_path, monkeypatch):
    from compactlab.reports import compare_report

    files = [SAMPLES / "synth-small.jsonl", SAMPLES / "synth-medium.jsonl", SAMPLES / "huge-batch.jsonl"]
    assert cli("compare", *files, "-p", "none", "-p", "s08", "--out", tmp_path / "n", "-q", "--charts", "none").exit_code == 0
    assert not (tmp_path / "n" / "charts").exists() and "<svg" not in (tmp_path / "n" / "report.html").read_text()
    assert "Charts" not in (tmp_path / "n" / "report.html").read_text() + (tmp_path / "n" / "report.md").read_text()
    monkeypatch.setattr(compare_report, "CHART_TRANSCRIPTS", 1)
    assert cli("compare", *files, "-p", "none", "-p", "s08", "--out", tmp_path / "a", "-q").exit_code == 0
    auto = sorted(p.name for p in (tmp_path / "a" / "charts").iterdir() if p.name.startswith("tokens-"))
    assert len(auto) == 1  # the transcript where the policies differ most
    assert cli("compare", *files, "-p", "none", "-p", "s08", "--out", tmp_path / "all", "-q", "--charts", "all").exit_code == 0
    assert len([p for p in (tmp_path / "all" / "charts").iterdir() if p.name.startswith("tokens-")]) == 3


@pytest.mark.parametrize("kept, recommended", [(95, "close"), (94, "none")])
def test_the_retention_margin_is_exactly_five_points_below_no_compaction(kept, recommended):
    """95% against no compaction's 100% is within the 5-point margin; 94% is not (a doubled margin
    would admit it). A policy that breaks tool pairs keeping everything sets no bar (#25 §8)."""
    df = frame([run("a", "none", 10, retained=100, refs=100), run("a", "broken", 3, retained=100, refs=100, violations=1),
                run("a", "close", 5, retained=kept, refs=100)])
    assert judge(df, [], reference="none").recommended == recommended


@pytest.mark.parametrize("kept, recommended", [(95, "close"), (94, "none")])
def test_the_recall_margin_is_exactly_five_points_below_no_compaction(kept, recommended):
    df = frame([{**run("a", "none", 10, retained=10), "probes": 100, "probes_kept": 100},
                {**run("a", "broken", 3, retained=10, overflows=1), "probes": 100, "probes_kept": 100},
                {**run("a", "close", 5, retained=10), "probes": 100, "probes_kept": kept}])
    assert judge(df, [], reference="none").recommended == recommended


# ---- (#27 §5) the guard as a property: over random runs and random lists of policies

from hypothesis import given, settings, strategies as st  # noqa: E402


@st.composite
def corpora(draw):
    transcripts = [f"t{i}" for i in range(draw(st.integers(1, 4)))]
    names = draw(st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), min_size=1, max_size=5, unique=True))
    rows = [{**run(t, "none", 10, retained=10, overflows=draw(st.sampled_from([0, 0, 1]))), "probes": 10,
             "probes_kept": 10} for t in transcripts]
    for name in names:
        for t in transcripts:
            rows.append({**run(t, name, draw(st.floats(1, 14)), retained=draw(st.integers(0, 10)),
                               violations=draw(st.sampled_from([0, 0, 0, 1])),
                               overflows=draw(st.sampled_from([0, 0, 0, 1]))),
                         "probes": 10, "probes_kept": draw(st.integers(0, 10))})
    return rows, names


def _passes(v, label):
    e = next(x for x in v.entries if x.label == label)
    return e.recall >= v.recall_floor - 1e-9 and e.retention >= v.retention_floor - 1e-9 and not e.violations_introduced


@settings(max_examples=examples(60), deadline=None, derandomize=True)
@given(corpora())
def test_the_recommendation_never_falls_below_the_floor_and_adding_a_policy_never_makes_it(case):
    rows, names = case
    v = judge(frame(rows), [], reference="none")
    assert v.passes == (v.recommended is not None and not v.recommendation.startswith("No policy passes"))
    if v.passes:
        assert _passes(v, v.recommended), v.recommendation
    # one policy more, of any kind, never turns a guarded recommendation into one below the floor
    extra = [{**run(r["transcript"], "zz", 0.5, retained=0), "probes": 10, "probes_kept": 0}
             for r in rows if r["policy"] == "none"]
    w = judge(frame(rows + extra), [], reference="none")
    if w.recommended is not None and not w.recommendation.startswith("No policy passes"):
        assert w.recommended != "zz" and _passes(w, w.recommended)


def test_a_policy_that_never_fired_is_named_with_its_trigger_and_none_wins_a_tie(cli):
    """(#27 §3) On a corpus far under their triggers, claude-code and gemini-cli are no compaction:
    the verdict says so with what would have made them act, and recommends none itself."""
    r = cli("compare", SAMPLES / "synth-small.jsonl", "-p", "claude-code", "-p", "gemini-cli", "-p", "s08",
            "--dry-run", "--format", "json")
    v = orjson.loads(r.stdout)["verdict"]
    assert v["recommended"] == "none" and v["passes"]
    assert "claude-code (summary past 167,000 tokens), gemini-cli (summary past 524,288 tokens) never acted" in \
        v["recommendation"]
    assert "there they are no compaction" in v["recommendation"]
    assert "No transcript fills the context window even with no compaction" in v["recommendation"]
    r = cli("compare", SAMPLES / "synth-small.jsonl", "-p", "claude-code", "-p", "s08", "--dry-run", "--format", "json")
    assert "claude-code (summary past 167,000 tokens) never acted on these transcripts (largest context 39,335 " \
           "tokens): there it is no compaction." in \
        orjson.loads(r.stdout)["verdict"]["recommendation"]


def test_the_saving_interval_drawn_in_blocks_is_the_interval_drawn_at_once(monkeypatch):
    """The bootstrap draws its resamples a block at a time (#32 §1: 10,000 transcripts at once held
    240 MB): the same draws, so the same interval, whatever the block."""
    from compactlab.corpus import verdict

    summaries = [{"cost_usd": 0.5 + (i * 37 % 11) / 10, "raw_cost_usd": 1.0 + (i * 13 % 7) / 5} for i in range(257)]
    monkeypatch.setattr(verdict, "BOOTSTRAP_CELLS", 10 ** 9)  # one block
    whole = verdict._interval(summaries)
    assert whole[0] < whole[1]
    for cells in (1, 257 * 3, 257 * 100 + 5):
        monkeypatch.setattr(verdict, "BOOTSTRAP_CELLS", cells)
        assert verdict._interval(summaries) == whole


def test_a_difference_within_a_cent_or_the_bootstraps_noise_is_a_tie():
    """(#43 §4) A run $0.000016 dearer than no compaction does not 'cost more'; a fallback pick whose
    total saving's interval spans no saving says it costs about as much."""
    from compactlab.corpus.verdict import dearer as _dearer

    assert not _dearer({"cost_usd": 0.050016, "raw_cost_usd": 0.05})
    assert _dearer({"cost_usd": 0.0515, "raw_cost_usd": 0.05})  # (3%: not a tie, though under a cent)
    assert _dearer({"cost_usd": 20.02, "raw_cost_usd": 20.0})  # (two cents: not a tie, though 0.1%)
    rows = [run("a", "none", 10, retained=10, overflows=2), run("b", "none", 10, retained=10, overflows=2),
            run("a", "p", 11, retained=7), run("b", "p", 9.6, retained=7)]
    v = judge(frame(rows), [], reference="none")
    assert v.recommended == "p" and not v.passes
    assert "costs about as much as no compaction (-3.0%, within the bootstrap's noise" in v.recommendation


# ---- (#55 §3) one rule for every recommender: never dearer than no compaction where it fits

def test_the_fallback_never_names_a_policy_dearer_than_none_where_none_fits_and_a_near_tie_goes_to_cost():
    """Long sessions: no compaction overflows on "long", fits on "short". Both policies lose
    recall (no policy passes). "opencode" keeps one referenced result more (a near tie) but costs
    more than no compaction on "short"; "claude-code" saves more and never costs more: it is named."""
    def rows(oc_short: float, oc_retained: int, oc_long: float = 14):
        return frame([run("long", "none", 30, retained=323, refs=323, overflows=4),
                      run("short", "none", 10, retained=10, refs=10),
                      run("long", "claude-code", 15, retained=305, refs=323),
                      run("short", "claude-code", 9.9, retained=10, refs=10),
                      run("long", "opencode", oc_long, retained=oc_retained, refs=323),
                      run("short", "opencode", oc_short, retained=10, refs=10)])
    v = judge(rows(10.62, 306), [], reference="none")
    assert not v.passes and v.recommended == "claude-code", v.recommendation
    assert "If you must compact, use claude-code" in v.recommendation
    # dearer where none fits, however far ahead on what it keeps: not named
    far = judge(rows(10.62, 323), [], reference="none")
    assert far.recommended == "claude-code", far.recommendation
    assert judge(rows(9.0, 323), [], reference="none").recommended == "opencode"  # (not dearer: its lead decides)
    # a near tie on what they keep (0.3 points), neither dearer: the cheaper one, whatever the list's order
    for df in (rows(9.95, 306, 15.5), list(reversed(rows(9.95, 306, 15.5)))):
        assert judge(df, [], reference="none").recommended == "claude-code"
    assert judge(rows(9.95, 306, 14.5), [], reference="none").recommended == "opencode"
    # and says so: it said claude-code "loses the least of what the agent used" where opencode keeps more
    tie = judge(rows(9.95, 306, 15.5), [], reference="none").recommendation
    assert "use claude-code: of the policies that fit the window it and opencode lose about as little of what the " \
        "agent used (within 1 point, by whichever of recall and retention stands lower against its floor), and it " in tie, tie
    assert "loses the least" not in tie
    assert "it loses the least of what the agent used and " in v.recommendation, v.recommendation[-500:]  # (opencode, dearer: no candidate)


def test_costing_more_on_half_the_transcripts_refuses_only_while_no_compaction_fits_everywhere():
    """Where no compaction overflows somewhere, the half rule does not apply: what counts is the cost
    where no compaction fits (here: a few cents more on two, a dollar less on one)."""
    rows = [run("a", "none", 10, retained=10, overflows=2), *(run(t, "none", 10, retained=10) for t in "bcd"),
            run("a", "p", 5, retained=10), run("b", "p", 10.02, retained=10), run("c", "p", 10.02, retained=10),
            run("d", "p", 9, retained=10)]
    v = judge(frame(rows), [], reference="none")
    assert v.passes and v.recommended == "p", v.recommendation
    # dearer where no compaction fits: it does not pass, and the verdict says why (the only policy
    # that fits "a", it is named only as what to use if you must compact)
    rows[-1] = run("d", "p", 10.5, retained=10)
    w = judge(frame(rows), [], reference="none")
    assert not w.passes and "costs more than no compaction on the 3 transcript(s) where no compaction fits the " \
        "window" in w.recommendation, w.recommendation


def test_where_every_policy_that_fits_costs_more_than_none_where_it_fits_none_is_recommended():
    rows = [run("a", "none", 10, retained=10, violations=0), run("a", "dear", 12, retained=10, violations=1)]
    v = judge(frame(rows), [], reference="none")
    assert v.recommended == "none"


def test_the_recall_floor_is_no_compactions_recall_when_it_keeps_the_recorded_compactions():
    """Under --keep-recorded-compactions no compaction loses what the recording's own compactions
    lost: its recall (not 1.0) less the margin is the floor."""
    rows = [{**run("a", "none", 10, retained=10), "probes": 100, "probes_kept": 70},
            {**run("a", "p", 6, retained=10), "probes": 100, "probes_kept": 66}]
    v = judge(frame(rows), [], reference="none")
    assert v.recall_floor == pytest.approx(0.65) and v.recommended == "p"


@st.composite
def tied_corpora(draw):
    """Costs from a few values, so that exact ties between policies are drawn on purpose."""
    transcripts = [f"t{i}" for i in range(draw(st.integers(1, 3)))]
    names = draw(st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=4, unique=True))
    rows = [{**run(t, "none", 10, retained=10, overflows=draw(st.sampled_from([0, 0, 0, 1]))), "probes": 10,
             "probes_kept": 10} for t in transcripts]
    for name in names:
        for t in transcripts:
            rows.append({**run(t, name, draw(st.sampled_from([6.0, 9.95, 10.0, 10.5, 12.0])),
                               retained=draw(st.sampled_from([9, 10])), overflows=draw(st.sampled_from([0, 0, 1]))),
                         "probes": 10, "probes_kept": draw(st.sampled_from([8, 10]))})
    return rows


@settings(max_examples=examples(80), deadline=None, derandomize=True)
@given(tied_corpora(), st.randoms(use_true_random=False))
def test_the_pick_and_the_fallback_never_name_a_policy_dearer_than_none_where_it_fits_nor_depend_on_order(rows, rnd):
    """Property (#55 §3): whatever the runs, the verdict's pick (or its fallback) costs no more than
    no compaction, beyond a tie, on the transcripts where no compaction fits; the list's order
    never changes it."""
    from compactlab.corpus.guard import dearer_than_none

    v = judge(frame(rows), [], reference="none")
    shuffled = list(rows)
    rnd.shuffle(shuffled)
    assert judge(frame(shuffled), [], reference="none").recommended == v.recommended
    fits = {r["transcript"] for r in rows if r["policy"] == "none" and not r["overflows"]}
    if v.recommended in (None, "none") or not fits:
        return
    mine = [r for r in rows if r["policy"] == v.recommended and r["transcript"] in fits]
    somebody_fits = {r["transcript"] for r in rows if not r["overflows"]}
    usable = {name for name in {r["policy"] for r in rows} - {"none"}
              if not any(r["overflows"] and r["transcript"] in somebody_fits for r in rows if r["policy"] == name)}
    cheap = [name for name in usable
             if not dearer_than_none(sum(r["cost_usd"] for r in rows if r["policy"] == name and r["transcript"] in fits),
                                     10.0 * len(fits))]
    if cheap or len(fits) == len({r["transcript"] for r in rows}):
        assert not dearer_than_none(sum(r["cost_usd"] for r in mine), 10.0 * len(fits)), v.recommendation


@pytest.mark.skipif(core.in_use() is None, reason="the native core is not built in this install: nothing to compare")
@settings(max_examples=examples(120), deadline=None)
@given(st.lists(st.tuples(st.one_of(st.just(0.0), st.floats(0, 50, allow_nan=False)),
                          st.one_of(st.just(0.0), st.floats(1e-9, 60, allow_nan=False))), min_size=2, max_size=300),
       st.sampled_from([1, 7, 1 << 20]))
def test_the_native_bootstrap_draws_numpys_interval_to_the_last_bit(pairs, cells):
    """The native core's bootstrap (``_native.bootstrap_interval``) against numpy's code, its
    reference (``verdict._drawn``): the same draws, sums and percentiles, unrounded, whatever the
    costs (none, tiny, equal) and however the reference blocks its draws."""
    from compactlab.corpus import verdict

    cost, raw = [c for c, _ in pairs], [r for _, r in pairs]
    with pytest.MonkeyPatch.context() as m:
        m.setattr(verdict, "BOOTSTRAP_CELLS", cells)
        assert core.in_use().bootstrap_interval(cost, raw, verdict.BOOTSTRAP) == verdict._drawn(cost, raw)


def test_the_bootstrap_of_a_large_corpus_is_numpys_and_what_is_left_to_it_is_said():
    """A corpus of thousands (the reference draws it in several blocks) and the cases the native
    core leaves to the reference (one transcript, a cost that is not a number): None."""
    import random

    from compactlab.corpus import verdict

    native = core.in_use()
    if native is None:
        pytest.skip("the native core is not built in this install: nothing to compare")
    gen = random.Random(3)
    cost = [gen.uniform(0, 9) for _ in range(5000)]
    raw = [c * gen.uniform(0.5, 3) for c in cost]
    assert native.bootstrap_interval(cost, raw, verdict.BOOTSTRAP) == verdict._drawn(cost, raw)
    assert native.bootstrap_interval([1.0], [2.0], verdict.BOOTSTRAP) is None
    assert native.bootstrap_interval([1.0, float("nan")], [2.0, 2.0], verdict.BOOTSTRAP) is None


def test_the_runner_ups_gap_is_in_points_of_the_savings_as_shown():
    """The verdict said of the shared Codex rollouts "The runner-up, claude-code, lost: it saves
    36.6%, 29.9% less" beside s08's 66.6%: a gap read as a share of 36.6% and not the difference of
    the two figures shown. It is the difference of the figures as shown, in percentage points."""
    raw = 100.0
    rows = [run("a", "s08", raw * (1 - 0.66649), raw=raw, retained=10),  # (shown 66.6%)
            run("a", "claude-code", raw * (1 - 0.36651), raw=raw, retained=10),  # (shown 36.7%)
            run("a", "none", raw, raw=raw, retained=10)]
    v = judge(frame(rows), [], reference="none")
    assert v.recommended == "s08" and v.runner_up == "claude-code"
    assert "Use s08: it saves 66.6%" in v.recommendation
    assert "The runner-up, claude-code, lost: it saves 36.7%, 29.9 points less." in v.recommendation, v.recommendation
    rows[1] = run("a", "claude-code", raw * (1 - 0.36649), raw=raw, retained=10)  # (shown 36.6%: 29.998 apart)
    v = judge(frame(rows), [], reference="none")
    assert "it saves 36.6%, 30.0 points less." in v.recommendation, v.recommendation


def test_a_policy_under_both_floors_is_said_by_the_one_furthest_under_then_the_other():
    """The guard named recall whenever recall was under its floor, though retention was further
    under (a real compare: recall 69.7%, 25.3 points under; retention 65.6%, 29.4 under) and
    retention set the lead the fallback weighed. The measure furthest under is said first, and
    the other after it; one under its floor alone is said alone, as before."""
    def rows(retained: int, probes_kept: int):
        return frame([{**run("a", "none", 10, retained=10, overflows=2), "probes": 100, "probes_kept": 100},
                      {**run("a", "p", 5, retained=retained), "probes": 100, "probes_kept": probes_kept}])
    both = judge(rows(6, 70), [], reference="none").recommendation
    assert ("p: retention 60.0% (the referenced tool results it keeps), 35.0 points under the 95.0% floor (no "
            "compaction's 100.0% less the 5-point margin), and recall 70.0%, 25.0 points under its floor") in both, both
    recall_worse = judge(rows(9, 50), [], reference="none").recommendation
    assert "p: recall 50.0% (its contexts hold that much of what the agent later used), 45.0 points under the 95.0% " \
        "floor (no compaction's 100.0% less the 5-point margin), and retention 90.0%, 5.0 points under its floor" \
        in recall_worse, recall_worse
    alone = judge(rows(10, 50), [], reference="none").recommendation
    assert "45.0 points under the 95.0% floor (no compaction's 100.0% less the 5-point margin); none:" in alone, alone
    assert "under its floor" not in alone


def test_the_savings_interval_is_called_95_percent_only_over_enough_transcripts():
    """A percentile bootstrap over 3 transcripts gave the lowest and the highest transcript's own
    saving and called them a "95% interval". Under ``FEW_FOR_INTERVAL`` transcripts the verdict
    gives the percentiles as they are, saying so; from there on, as a 95% interval."""
    from compactlab.corpus.verdict import FEW_FOR_INTERVAL

    def verdict(n: int) -> str:
        rows = [run(f"t{i}", "none", 10, retained=10) for i in range(n)]
        rows += [run(f"t{i}", "p", 5 + i % 3, retained=10) for i in range(n)]
        return judge(frame(rows), [], reference="none").recommendation

    few = verdict(3)
    assert "3 transcripts are too few for a 95% interval: a bootstrap over them gives 30.0% to 50.0%" in few, few
    assert "; 95% interval" not in few
    enough = verdict(FEW_FOR_INTERVAL)
    assert "; 95% interval over the transcripts" in enough and "too few" not in enough, enough
    assert "interval" not in verdict(1)  # (one transcript: its saving, no spread)


def test_a_design_a_harness_user_cannot_switch_to_is_said_so_with_the_search_they_can_run(cli, shared_transcripts):
    """compare of the shared Codex rollouts said "Use s08" and no more: a Codex user cannot switch to
    compactlab's design. Where every session compared is one harness's (of those whose settings
    are known) and the verdict names a policy that is not that harness's, it now says so and names
    the search of what the harness lets its user set; not for no compaction, the harness's own
    preset or a variant of it, nor for sessions of several harnesses."""
    from types import SimpleNamespace as NS

    from compactlab.reports.compare_report import not_a_setting

    def runs(*formats):
        return [NS(summary=NS(format=f)) for f in formats]

    said = ("s08 is not a setting of Codex CLI, whose sessions these are: compactlab tune --harness codex "
            "searches what Codex CLI lets you set, on these sessions.")
    assert not_a_setting(runs("codex", "codex"), "s08", "none") == said
    converted = [NS(summary=NS(format="anthropic", recorded_format="codex"))]  # (convert's file of a rollout)
    assert not_a_setting(converted, "s08", "none") == said
    assert "claude-code is not a setting of Gemini CLI" in not_a_setting(runs("gemini-cli"), "claude-code", "none")
    for fmts, recommended in ((("claude-code",), "none"), (("codex",), "codex"), (("codex",), "codex summary.trigger=200000"),
                              (("codex",), None), (("codex", "claude-code"), "s08"), (("anthropic",), "s08"),
                              (("mini-swe-agent",), "s08")):
        assert not_a_setting(runs(*fmts), recommended, "none") is None, (fmts, recommended)
    # (no compaction, where the harness cannot turn compaction off: tune's "not a candidate", said here too)
    assert not_a_setting(runs("codex"), "none", "none") == (
        "No compaction is not a setting of Codex CLI: Codex CLI has no setting that turns auto-compaction off (it "
        "takes the lesser of model_auto_compact_token_limit and 90% of the window); compactlab tune --harness codex "
        "searches what Codex CLI lets you set, on these sessions.")
    assert "No compaction is not a setting of Gemini CLI" in not_a_setting(runs("gemini-cli"), "none", "none")
    # (its own preset compared and idle: keeping it is keeping no compaction, the answer to give)
    kept = not_a_setting(runs("gemini-cli"), "none", "none", [], {"gemini-cli", "none"})
    assert kept == ("No compaction is not a setting of Gemini CLI (compactlab knows no Gemini CLI setting that turns "
                    "chat compression off); gemini-cli, its default, gives it here: keep it as it is.")
    r = cli("compare", shared_transcripts / "codex", "-p", "s08", "-p", "codex", "--dry-run", "--format", "json")
    assert r.exit_code == 0, r.stderr
    verdict = orjson.loads(r.stdout)["verdict"]
    assert (said in verdict["recommendation"]) == (verdict["recommended"] == "s08"), verdict["recommendation"]


# ---- one answer, whatever the path: where nothing passes, tune names the one compare names

@settings(max_examples=examples(120), deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.sampled_from([0.1, 0.3, 0.3, 0.5, 0.7]), st.integers(40, 100), st.integers(40, 100)),
                min_size=2, max_size=6))
def test_where_nothing_passes_tune_and_compare_name_the_same_one_to_use(points):
    """A tune where no point keeps recall and retention above the floors said "keep the base as it
    is" where a compare of the very same policies said "if you must compact, use" the one that loses
    least (the base dominated by a front point, on three Claude Code sessions). Both now follow the
    one rule: the same point, whatever the path. (The policies are named as tune names its
    candidates, so that an exact tie is broken the same way.)"""
    from compactlab.corpus.recommend import recommend
    from compactlab.corpus.trials import Point, TuneResult

    def pt(n, saving, recall, retention):
        return Point(n, {"summary.trigger": n}, {"cost": saving, "recall": recall / 100, "retention": retention / 100,
                                                 "violations": 0, "overflows": 0, "cost_usd": 10 * (1 - saving),
                                                 "raw_cost_usd": 10.0, "probes": 100})

    made = [pt(i, s, r, t) for i, (s, r, t) in enumerate(points)]
    base, front = made[0], made[1:]
    none = Point(-2, {}, {"cost": 0.0, "recall": 1.0, "retention": 1.0, "violations": 0, "overflows": 3,
                          "cost_usd": 10.0, "raw_cost_usd": 10.0, "probes": 100}, False)
    result = TuneResult("s08", [], ["cost", "recall"], base, front, front, reference=none)
    recommend(result)
    label = {id(base): "0 base", **{id(p): f"1 summary.trigger={p.values['summary.trigger']}" for p in front}}
    rows = [{**run("a", "none", 10, retained=100, refs=100, overflows=3), "probes": 100, "probes_kept": 100}]
    rows += [{**run("a", label[id(p)], 10 * (1 - p.scores["cost"]), retained=round(p.scores["retention"] * 100),
                    refs=100), "probes": 100, "probes_kept": round(p.scores["recall"] * 100)}
             for p in [base, *{id(p): p for p in front if p.values != base.values}.values()]]
    v = judge(frame(rows), [], reference="none")
    if result.passes:  # (a point above the floors: compare recommends it as passing too)
        assert v.passes and v.recommended == label[id(result.chosen)]
    else:
        assert not v.passes and result.chosen is not None and v.recommended == label[id(result.chosen)], (
            v.recommendation, result.recommendation)


def test_a_tune_front_file_is_the_harness_setting_it_is_not_a_foreign_design(tmp_path):
    """compare of Claude Code sessions with tune's front-05.toml (``extends = "claude-code"`` and
    its summary.trigger) named it "not a setting of Claude Code" and sent the user to the tune they
    had just run. A policy that is a harness's preset with only what the harness lets you set changed
    is that harness's setting, whatever its name: the verdict prints the line to paste instead."""
    from types import SimpleNamespace as NS

    from compactlab import load_policy
    from compactlab.corpus.harness_settings import of_policy, setting_of
    from compactlab.reports.compare_report import not_a_setting

    front = tmp_path / "front-05.toml"
    front.write_text('extends = "claude-code"\nname = "claude-code-front-05"\n\n[summary]\ntrigger_share = 0.77\n')
    policy = load_policy(str(front))
    assert of_policy(policy).name == "claude-code"
    title, lines = setting_of(policy)
    assert title == "Claude Code" and "export CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=77" in lines
    runs = [NS(summary=NS(format="claude-code"))]
    assert not_a_setting(runs, "claude-code-front-05", "none", [title, *lines]) is None
    # another change besides (a layer Claude Code does not let you set): a design of your own
    other = tmp_path / "mine.toml"
    other.write_text('extends = "claude-code"\nname = "mine"\n\n[summary]\ntrigger_share = 0.77\n\n[micro]\nenabled = true\n')
    # (one trigger on every session, whatever its window, is no setting of Claude Code's either)
    single = tmp_path / "single.toml"
    single.write_text('extends = "claude-code"\nname = "single"\n\n[summary]\ntrigger = 154000\n')
    assert of_policy(load_policy(str(single))) is None and load_policy(str(single)).summary.trigger_rule == ""
    assert of_policy(load_policy(str(other))) is None and setting_of(load_policy(str(other))) is None
    assert "mine is not a setting of Claude Code" in not_a_setting(runs, "mine", "none", [])
    assert of_policy(load_policy("s08")) is None and of_policy(load_policy("codex")).name == "codex"


def test_tune_weighs_a_cost_against_no_compaction_where_compare_does():
    """Where no compaction overflows one transcript, compare holds a policy's cost to no compaction's
    on the others only (``dearer_where_fits``); tune held it over the whole corpus, so a point that
    costs more where no compaction fits, and saves overall on the transcript it overflows, was
    tune's pick and compare's reject. Both now weigh it where no compaction fits."""
    from compactlab.corpus.recommend import recommend
    from compactlab.corpus.trials import Point, TuneResult
    from compactlab.corpus.tune import totals

    def rows(policy, cost_a, cost_b, **extra):  # (a: no compaction overflows it; b: it fits)
        return [{**run("a", policy, cost_a, raw=10, retained=10, **extra), "raw_overflows": 4, "probes": 10,
                 "probes_kept": 10},
                {**run("b", policy, cost_b, raw=2, retained=10, **extra), "raw_overflows": 0, "probes": 10,
                 "probes_kept": 10}]

    none = rows("none", 10, 2, overflows=4)
    none[1]["overflows"] = 0
    grid = {"1 summary.trigger=1": rows("1 summary.trigger=1", 3, 2.5),  # saves most, dearer on b
            "1 summary.trigger=2": rows("1 summary.trigger=2", 6, 2.0),  # saves less, not dearer on b
            "0 base": rows("0 base", 9, 2.0)}
    v = judge(frame([*none, *(r for rs in grid.values() for r in rs)]), [], reference="none")
    assert v.recommended == "1 summary.trigger=2", v.recommendation

    def point(n, label):
        scores = totals(grid[label])
        return Point(n, {"summary.trigger": n} if n > 0 else {}, {**scores, "recall": 1.0, "retention": 1.0})

    front = [point(1, "1 summary.trigger=1"), point(2, "1 summary.trigger=2")]
    ref = Point(-2, {}, {**totals(none), "recall": 1.0, "retention": 1.0}, False)
    result = TuneResult("s08", [], ["cost", "recall"], point(-1, "0 base"), front, front, reference=ref)
    text = recommend(result)
    assert result.chosen is front[1] and ("Use front point 2" in text or "front point 2 (summary.trigger=2)" in text), text


def test_no_compaction_recommended_on_one_harness_s_sessions_prints_its_setting_that_turns_it_off():
    """compare of Claude Code sessions that recommends no compaction printed no setting, where tune
    --harness claude-code prints the one that turns auto-compaction off: the same answer now gives
    the same lines to paste; where the harness cannot turn it off, it says so (above)."""
    from types import SimpleNamespace as NS

    from compactlab.reports.compare_report import setting_for, setting_heading

    def runs(*formats):
        return [NS(summary=NS(format=f)) for f in formats]

    off = setting_for(runs("claude-code", "claude-code"), "none", "none", [])
    assert off == ["Claude Code", "export DISABLE_AUTO_COMPACT=1", '~/.claude/settings.json: {"autoCompactEnabled": false}']
    assert setting_heading(off, "none") == "none is the Claude Code setting:"
    assert setting_for(runs("pi"), "none", "none", []) == ["Pi", '~/.pi/agent/settings.json: {"compaction": {"enabled": false}}']
    given = ["Claude Code", "export CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=77"]
    assert setting_for(runs("claude-code"), "claude-code-front-05", "none", given) == given
    # (where its own preset was compared and never acted, it is no compaction here: keep it, as tune says)
    assert setting_for(runs("claude-code"), "none", "none", [], idle={"claude-code", "s06"}) == []
    assert setting_for(runs("claude-code"), "none", "none", [], idle={"s06"}) == off
    for fmts, recommended in ((("claude-code",), "s08"), (("codex",), "none"), (("gemini-cli",), "none"),
                              (("anthropic",), "none"), (("claude-code", "codex"), "none"), (("claude-code",), None)):
        assert setting_for(runs(*fmts), recommended, "none", []) == [], (fmts, recommended)

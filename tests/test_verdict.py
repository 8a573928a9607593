"""compare's verdict: per policy across the transcripts, then which one to use and why (#18 §1)."""

from __future__ import annotations

import orjson
import pandas as pd
import pytest

from compactlab.verdict import judge
from helpers import SAMPLES


def run(transcript: str, policy: str, cost: float, raw: float = 10.0, retained: int = 8, refs: int = 10,
        violations: int = 0, overflows: int = 0, **swept) -> dict:
    return {"transcript": transcript, "policy": policy, **swept, "cost_usd": cost, "raw_cost_usd": raw,
            "cost_saving": 1 - cost / raw, "tokens_total": int(cost * 100), "raw_tokens_total": int(raw * 100),
            "refs": refs, "refs_retained": retained, "violations_introduced": violations, "overflows": overflows,
            "summaries": 1, "probes": 0, "probes_kept": 0}


def frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows)


def test_the_best_saving_that_breaks_nothing_and_keeps_retention_is_recommended():
    df = frame([run("a", "none", 10, retained=10), run("b", "none", 20, raw=20, retained=10),
                run("a", "cheap-but-broken", 2, violations=2), run("b", "cheap-but-broken", 4, raw=20),
                run("a", "forgetful", 3, retained=2), run("b", "forgetful", 6, raw=20, retained=2),
                run("a", "good", 5, retained=8), run("b", "good", 12, raw=20, retained=9)])
    v = judge(df, [])
    assert [e.label for e in v.entries] == ["cheap-but-broken", "forgetful", "good", "none"]
    good = next(e for e in v.entries if e.label == "good")
    assert good.cost_saving == pytest.approx(1 - 17 / 30) and good.median_saving == pytest.approx((0.5 + 0.4) / 2)
    assert good.retention == pytest.approx(17 / 20) and good.transcripts == 2 and good.costs_more == 0
    assert v.recommended == "good" and v.runner_up == "cheap-but-broken"
    assert "Use good: it saves 43.3%" in v.recommendation
    assert "The runner-up, cheap-but-broken saves 80.0% but lost: it introduces 2 tool-pairing violation(s)" in v.recommendation
    assert "forgetful saves 70.0% but lost: it keeps 20.0%" in v.recommendation
    # forgetful's 20% retention is more than 5 points below good's 85%; a wider margin admits it
    assert judge(df, [], margin=0.7).recommended == "forgetful"


def test_overflows_disqualify_and_no_saving_recommends_no_compaction():
    df = frame([run("a", "none", 10, retained=10, overflows=3), run("a", "dear", 12), run("a", "even", 10)])
    v = judge(df, [])
    assert v.recommended == "even" and "no policy costs less" in v.recommendation
    only_none = judge(frame([run("a", "none", 10, overflows=1)]), [])
    assert only_none.recommended is None and "overflow the context window" in only_none.recommendation
    dearer = judge(frame([run("a", "dear", 12), run("b", "dear", 8)]), []).entries[0]
    assert dearer.costs_more == 1


def test_a_sweep_ranks_the_swept_values():
    rows = [run("a", "s08", c, **{"summary.trigger": t}) for t, c in ((20000, 4), (50000, 3), (100000, 6))]
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
    assert r.stdout.startswith("verdict over 2 transcript(s)") and "\nUse " in r.stdout
    assert r.stdout.index("Use ") < r.stdout.index("6 runs")
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
    assert sorted(p.name for p in (out / "charts").iterdir()) == ["pareto.png", "savings.png"]  # no transcript's


def test_charts_none_and_all(cli, tmp_path, monkeypatch):
    from compactlab.reports import compare_report

    files = [SAMPLES / "synth-small.jsonl", SAMPLES / "synth-medium.jsonl", SAMPLES / "huge-batch.jsonl"]
    assert cli("compare", *files, "-p", "none", "-p", "s08", "--out", tmp_path / "n", "-q", "--charts", "none").exit_code == 0
    assert not (tmp_path / "n" / "charts").exists() and "<svg" not in (tmp_path / "n" / "report.html").read_text()
    monkeypatch.setattr(compare_report, "CHART_TRANSCRIPTS", 1)
    assert cli("compare", *files, "-p", "none", "-p", "s08", "--out", tmp_path / "a", "-q").exit_code == 0
    auto = sorted(p.name for p in (tmp_path / "a" / "charts").iterdir() if p.name.startswith("tokens-"))
    assert len(auto) == 1  # the transcript where the policies differ most
    assert cli("compare", *files, "-p", "none", "-p", "s08", "--out", tmp_path / "all", "-q", "--charts", "all").exit_code == 0
    assert len([p for p in (tmp_path / "all" / "charts").iterdir() if p.name.startswith("tokens-")]) == 3


def test_the_best_retention_and_recall_come_only_from_policies_that_qualify():
    """(#25 §8) A policy that breaks tool pairs or overflows keeps every result: it must not set the
    bar that the qualifying savers are held to."""
    def rows(fatal: dict) -> pd.DataFrame:
        return frame([run("a", "none", 10, retained=100, refs=100),
                      run("a", "keeps-all-but-broken", 3, retained=100, refs=100, **fatal),
                      run("a", "good", 5, retained=80, refs=100)])

    for fatal in ({"violations": 1}, {"overflows": 2}):
        v = judge(rows(fatal), [])
        assert v.recommended == "good", (fatal, v.recommendation)
    recall_rows = frame([{**run("a", "none", 10), "probes": 10, "probes_kept": 10},
                         {**run("a", "broken", 3, violations=1), "probes": 10, "probes_kept": 10},
                         {**run("a", "good", 5), "probes": 10, "probes_kept": 7}])
    assert judge(recall_rows, []).recommended == "good"


@pytest.mark.parametrize("kept, recommended", [(85, "close"), (84, "best")])
def test_the_retention_margin_is_exactly_five_points(kept, recommended):
    """85% against a best of 90% is within the 5-point margin; 84% is not (a doubled margin would
    admit it)."""
    df = frame([run("a", "best", 6, retained=90, refs=100), run("a", "close", 5, retained=kept, refs=100)])
    assert judge(df, []).recommended == recommended


@pytest.mark.parametrize("kept, recommended", [(85, "close"), (84, "best")])
def test_the_recall_margin_is_exactly_five_points(kept, recommended):
    df = frame([{**run("a", "best", 6), "probes": 100, "probes_kept": 90},
                {**run("a", "close", 5), "probes": 100, "probes_kept": kept}])
    assert judge(df, []).recommended == recommended

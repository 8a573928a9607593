"""The metrics registry (#26 §1): each metric once, the corpus totalled one way, every output
that lists metrics listing every one."""

from __future__ import annotations

import csv
import json
from dataclasses import fields

import pytest

from compactlab import metrics
from compactlab.corpus.check import COMPARED, STORED
from compactlab.engine.records import RunSummary
from compactlab.corpus.tune import OBJECTIVES, totals as tune_totals
from compactlab.corpus.verdict import Entry
from helpers import SAMPLES


def run(**parts) -> dict:
    base = dict.fromkeys(metrics.PARTS, 0)
    return {**base, **parts}


def test_shares_are_ratios_of_sums_never_means_of_ratios():
    a = run(probes=1, probes_kept=1, refs=10, refs_retained=0, cost_usd=1, raw_cost_usd=10, tokens_total=5,
            raw_tokens_total=10)
    b = run(probes=99, probes_kept=0, refs=0, refs_retained=0, cost_usd=30, raw_cost_usd=10, tokens_total=10,
            raw_tokens_total=10)
    t = metrics.totals([a, b])
    assert t["recall"] == pytest.approx(1 / 100)  # a mean of the runs' recalls would say 0.5
    assert t["retention"] == 0.0  # b counts no reference: it adds nothing, not a 1.0
    assert t["cost_saving"] == pytest.approx(1 - 31 / 20) and t["reduction"] == pytest.approx(1 - 15 / 20)
    empty = metrics.totals([run()])
    assert empty["recall"] == empty["retention"] == 1.0 and empty["cost_saving"] == empty["reduction"] == 0.0
    assert metrics.totals([a, b])["tokens_total"] == 15 and metrics.totals([])["violations_introduced"] == 0


def test_every_metric_is_in_every_output_that_lists_metrics(cli, tmp_path):
    summary_keys = {f.name for f in fields(RunSummary)}
    entry_keys = {f.name for f in fields(Entry)}
    out = tmp_path / "cmp"
    assert cli("compare", SAMPLES / "synth-small.jsonl", "-p", "none", "-p", "s08", "--out", out, "-q",
               "--charts", "none").exit_code == 0
    columns = set(next(csv.reader((out / "results.csv").open())))
    verdict = json.loads((out / "results.json").read_text())["verdict"]["entries"][0]
    for name, m in metrics.METRICS.items():
        assert name in columns, name  # results.csv
        assert name in verdict and name in entry_keys, name  # the verdict
        assert name in summary_keys or m.denominator, name  # a run's summary holds it or its parts
        assert all(p in summary_keys for p in m.parts), name
    for name, m in metrics.METRICS.items():
        if m.tolerance is not None:
            assert COMPARED[name][0] == m.tolerance and name in STORED  # check compares and stores it
        if m.objective is not None:
            assert m.objective in OBJECTIVES  # tune optimises it
    assert set(COMPARED) == {n for n, m in metrics.METRICS.items() if m.tolerance}


def test_tune_and_the_verdict_total_a_corpus_as_the_registry_does(cli, tmp_path):
    out = tmp_path / "cmp"
    files = [SAMPLES / "synth-small.jsonl", SAMPLES / "synth-medium.jsonl"]
    assert cli("compare", *files, "-p", "s08", "--out", out, "-q", "--charts", "none").exit_code == 0
    doc = json.loads((out / "results.json").read_text())
    runs = [r for r in doc["runs"] if r["policy"] == "s08"]  # (no compaction, the reference, ran too)
    assert {r["policy"] for r in doc["runs"]} == {"s08", "none"} and len(runs) == 2
    want = metrics.totals(runs)
    entry = next(e for e in doc["verdict"]["entries"] if e["label"] == "s08")
    for name in ("cost_saving", "reduction", "retention", "recall"):
        assert entry[name] == pytest.approx(want[name], abs=1e-6), name
    t = tune_totals(runs)
    assert t["cost"] == pytest.approx(want["cost_saving"]) and t["recall"] == pytest.approx(want["recall"])


def test_checks_tolerance_help_is_the_registrys(monkeypatch):
    """(#44 §5) check --tolerance names every compared metric and their count from the registry
    (it said "all five" where six were compared); a metric added there is named."""
    from compactlab import metrics

    text = metrics.tolerance_help()
    assert f"X sets all {len(metrics.COMPARED)}" in text and all(name in text for name in metrics.COMPARED)
    monkeypatch.setitem(metrics.COMPARED, "summary_cost_usd", ("relative", "up"))
    assert "cost_usd and summary_cost_usd, absolute" in metrics.tolerance_help().replace("tokens_total, ", "")
    assert f"X sets all {len(metrics.COMPARED)}" in metrics.tolerance_help()

"""The metrics registry (#26 §1): each metric once, the corpus totalled one way, every output
that lists metrics listing every one."""

from __future__ import annotations

import csv
import json
from dataclasses import fields

import pytest

from compactlab import metrics
from compactlab.corpus.check import stored
from compactlab.engine.records import RunSummary
from compactlab.corpus.tune import totals as tune_totals
from helpers import ROOT, SAMPLES


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
    out = tmp_path / "cmp"
    assert cli("compare", SAMPLES / "synth-small.jsonl", "-p", "none", "-p", "s08", "--out", out, "-q",
               "--charts", "none").exit_code == 0
    columns = set(next(csv.reader((out / "results.csv").open())))
    verdict = json.loads((out / "results.json").read_text())["verdict"]["entries"][0]
    for name, m in metrics.METRICS.items():
        assert name in columns, name  # results.csv
        assert name in verdict, name  # the verdict
        assert name in summary_keys or m.denominator, name  # a run's summary holds it or its parts
        assert all(p in summary_keys for p in m.parts), name
    for name, m in metrics.METRICS.items():
        if m.tolerance is not None:
            assert metrics.COMPARED[name][0] == m.tolerance and name in stored()  # check compares and stores it
        if m.objective is not None:
            assert metrics.OBJECTIVES[m.objective] is m  # tune optimises it
    assert set(metrics.COMPARED) == {n for n, m in metrics.METRICS.items() if m.tolerance}


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


def test_numbers_add_and_give_every_metric_as_a_property():
    """(#44 §5) A run's totals have one typed shape: the parts, added with +, each metric a property
    derived from the registry (coverage.py's Numbers)."""
    a = metrics.Numbers(run(probes=4, probes_kept=3, cost_usd=2.0, raw_cost_usd=4.0, tokens_total=10))
    b = metrics.Numbers(run(probes=6, probes_kept=0, cost_usd=1.0, raw_cost_usd=6.0, tokens_total=5))
    total = a + b
    assert total.probes == 10 and total.recall == pytest.approx(0.3) and total.cost_saving == pytest.approx(0.7)
    assert sum([a, b]) == total and total.metrics() == metrics.totals([run(probes=4, probes_kept=3, cost_usd=2.0,
        raw_cost_usd=4.0, tokens_total=10), run(probes=6, probes_kept=0, cost_usd=1.0, raw_cost_usd=6.0, tokens_total=5)])
    assert metrics.Numbers().recall == 1.0 and metrics.Numbers().cost_saving == 0.0  # the registry's empty values
    assert isinstance(vars(metrics.Numbers)["recall"], property) and "_parts" in metrics.Numbers.__slots__


@pytest.fixture
def two_more_metrics():
    """The registry with two metrics added as metrics.py's recipe says: an entry each. One is made of
    a part no metric used (the summary's summary_input_tokens), one of parts others use."""
    added = [metrics.Metric("summary_input_tokens", "summary tokens", "tokens", "lower", "relative",
                            "summary_input_tokens", table="essential", description="tokens sent to summarise"),
             metrics.Metric("probes_lost", "lost", "share", "lower", "absolute", "probes_kept", "probes", complement=True,
                            objective="loss", description="probes the contexts sent did not hold")]
    metrics.define([*metrics.REGISTRY, *added])
    yield added
    metrics.define(metrics.REGISTRY)


def test_a_metric_added_to_the_registry_is_in_every_output(two_more_metrics, cli, tmp_path):
    """(#44 §5) Adding a metric is its registry entry plus its parts: results.csv, results.json's
    verdict, the reports' tables, --sort, the check baseline with its tolerance and help, and tune's
    objectives follow, with no other code changed."""
    out = tmp_path / "cmp"
    r = cli("compare", SAMPLES / "synth-small.jsonl", SAMPLES / "synth-medium.jsonl", "-p", "s08", "--out", out,
            "--charts", "none", "--sort", "probes_lost")
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader((out / "results.csv").open()))
    doc = json.loads((out / "results.json").read_text())
    s08 = [row for row in doc["runs"] if row["policy"] == "s08"]
    for row in rows:
        assert float(row["probes_lost"]) == pytest.approx(1 - float(row["recall"]) if int(row["probes"]) else 0.0,
                                                          abs=1e-6)
        assert int(row["summary_input_tokens"]) >= 0
    losses = [float(row["probes_lost"]) for row in rows]
    assert losses == sorted(losses)  # lower is better: sorted best first, ascending
    entry = next(e for e in doc["verdict"]["entries"] if e["label"] == "s08")
    assert entry["summary_input_tokens"] == sum(r["summary_input_tokens"] for r in s08) > 0
    assert entry["probes_lost"] == pytest.approx(metrics.totals(s08)["probes_lost"], abs=1e-6)
    md = (out / "report.md").read_text()
    assert "| summary tokens |" in md and "| lost |" in md  # the verdict's table and the runs'
    assert "summary tokens" in r.output and "lost" in r.output  # the terminal's
    assert tune_totals(s08)["loss"] == pytest.approx(entry["probes_lost"], abs=1e-6)
    assert "summary_input_tokens" in metrics.tolerance_help() and "probes_lost" in metrics.tolerance_help()

    baseline = tmp_path / "baseline.json"
    files = [SAMPLES / "synth-small.jsonl"]
    assert cli("check", *files, "-p", "s08", "--baseline", baseline, "--update-baseline").exit_code == 0
    record = json.loads(baseline.read_text())["records"][0]["metrics"]
    assert record["summary_input_tokens"] > 0 and "probes_lost" in record
    record["summary_input_tokens"] //= 2  # the baseline's summaries were half as dear: now 100% worse
    doc = json.loads(baseline.read_text())
    doc["records"][0]["metrics"] = record
    baseline.write_text(json.dumps(doc))
    failed = cli("check", *files, "-p", "s08", "--baseline", baseline)
    assert failed.exit_code == 1 and "summary_input_tokens" in failed.output
    assert cli("check", *files, "-p", "s08", "--baseline", baseline, "--tolerance", "summary_input_tokens=1.5",
               ).exit_code == 0


def test_the_typed_names_are_the_registrys_metrics_and_parts():
    """(#60) ``Named`` types every metric and part: it names exactly the registry's, so that a
    misspelt metric (``Numbers().recal``) is a type error, and every name it types is real."""
    from compactlab import metrics

    assert set(metrics.Named.__annotations__) == set(metrics.METRICS) | set(metrics.PARTS)
    n = metrics.Numbers({"probes": 10, "probes_kept": 9})
    assert n.recall == 0.9 and n.probes == 10
    with pytest.raises(AttributeError):
        n.recal  # noqa: B018 (what mypy now refuses)


MISTAKES = '''
from compactlab.config import Section, section
from compactlab.metrics import Numbers

recall: float = Numbers({"probes": 10}).recal


@section
class Table(Section):
    size: int = 1


Table().size = 2
'''


def test_mypy_refuses_a_misspelt_metric_and_a_change_to_a_policys_table(tmp_path):
    """(#60 §2) The typed totals and the frozen tables are typed in fact: mypy, run as CI runs it
    (the checkout's package, pyproject's settings), reports both mistakes of a snippet."""
    import subprocess
    import sys

    pytest.importorskip("mypy", reason="mypy is a test extra (pip install '.[test]')")
    snippet = tmp_path / "mistakes.py"
    snippet.write_text(MISTAKES)
    r = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), "--no-error-summary",
                        str(snippet)], cwd=ROOT, capture_output=True, text=True)
    said = r.stdout
    assert r.returncode == 1, said + r.stderr
    assert '"Numbers" has no attribute "recal"' in said and 'Property "size" defined in "Table" is read-only' in said
    assert said.count("error:") == 2, said

from __future__ import annotations

import json

import pandas as pd

from compactlab.records import NUMERIC_SUMMARY_KEYS
from helpers import SAMPLES

T1, T2 = SAMPLES / "synth-small.jsonl", SAMPLES / "manual-compact.jsonl"
GRID = ["-p", "none", "-p", "s06", "-p", "s08", "--sweep", "summary.trigger=20000,50000,100000"]


def test_compare_writes_every_row_and_report(cli, tmp_path):
    out = tmp_path / "cmp"
    r = cli("compare", T1, T2, *GRID, "--out", out, "--jobs", "2")
    assert r.exit_code == 0, r.output
    df = pd.read_csv(out / "results.csv")
    assert len(df) == 18
    assert list(df.columns[:3]) == ["transcript", "policy", "summary.trigger"]
    for key in NUMERIC_SUMMARY_KEYS:
        assert key in df.columns, key
    assert set(df["policy"]) == {"none", "s06", "s08"} and set(df["summary.trigger"]) == {20000, 50000, 100000}
    rows = json.loads((out / "results.json").read_text())["runs"]
    assert len(rows) == 18 and rows[0]["cost_saving"] >= rows[-1]["cost_saving"]  # sorted by cost saving
    html = (out / "report.html").read_text()
    assert html.count("<svg") == 4  # two transcripts' token charts, the Pareto chart and the savings per transcript
    # opens offline: nothing is loaded from anywhere (XML namespace URIs are names, not fetches)
    import re

    for banned in ("<script", "<link", "@import", "<img", "<iframe"):
        assert banned not in html
    assert not re.search(r"""(src|href)\s*=\s*["'](https?:)?//""", html)
    assert not re.search(r"url\(\s*['\"]?https?:", html)
    assert (out / "charts" / "pareto.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "report.md").read_text().count("charts/") == 4


def test_jobs_1_and_2_give_identical_numbers(cli, tmp_path):
    a = cli("compare", T1, T2, *GRID, "--dry-run", "--jobs", "1", "--format", "json")
    b = cli("compare", T1, T2, *GRID, "--dry-run", "--jobs", "2", "--format", "json")
    assert json.loads(a.stdout)["runs"] == json.loads(b.stdout)["runs"]  # no timing in them
    assert json.loads(a.stdout)["verdict"] == json.loads(b.stdout)["verdict"]
    assert len(json.loads(a.stdout)["runs"]) == 18


def test_compare_matches_replay(cli):
    rows = json.loads(cli("compare", T1, "-p", "s08", "--dry-run", "--format", "json").stdout)["runs"]
    single = json.loads(cli("replay", T1, "-p", "s08", "--dry-run", "--format", "json").stdout)["runs"][0]["summary"]
    for key in ("tokens_total", "cost_usd", "retention", "summaries", "violations_introduced"):
        assert rows[0][key] == single[key], key


def test_compare_errors(cli, tmp_path):
    r = cli("compare", T1, "--sweep", "summary.trigger", "--dry-run")
    assert r.exit_code == 2 and "expected KEY=V1,V2" in r.stderr
    r = cli("compare", T1, "--sweep", "summary.nope=1,2", "--dry-run")
    assert r.exit_code == 2 and "summary.nope: unknown key" in r.stderr
    r = cli("compare", T1, "--sort", "bogus", "--dry-run")
    assert r.exit_code == 2 and "--sort 'bogus'" in r.stderr


def test_unknown_price_model_warns(cli):
    r = cli("compare", T1, "-p", "none", "--price-model", "gpt-99", "--dry-run", "--format", "csv")
    assert r.exit_code == 0 and "no prices for model 'gpt-99'" in r.stderr


def test_replay_chart_is_opt_in(cli, tmp_path):
    cli("replay", T1, "--out", tmp_path / "a")
    assert not (tmp_path / "a" / "chart.png").exists()
    cli("replay", T1, "--out", tmp_path / "b", "--chart")
    assert (tmp_path / "b" / "chart.png").read_bytes()[:4] == b"\x89PNG"

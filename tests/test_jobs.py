"""jobs.replay.replay_files: what `compactlab replay` does, as one library call."""

from __future__ import annotations

import orjson

from compactlab.engine.policy import load_policy
from compactlab.jobs.replay import ReplaySettings, replay_files
from helpers import SAMPLES, files_under, read_csv


def test_replay_files_owns_the_output_folder_from_start_to_end(tmp_path):
    said: list[tuple[str, bool]] = []
    files = [str(SAMPLES / "synth-small.jsonl"), str(SAMPLES / "manual-compact.jsonl")]
    settings = ReplaySettings(policy=load_policy("s08"), out_dir=str(tmp_path / "out"), chart=True)
    done = replay_files(files, settings, lambda message, always: said.append((message, always)))
    assert [r.summary.transcript for r in done.runs] == files and done.interrupted is None
    assert done.folder == str(tmp_path / "out") and done.total == 2
    written = files_under(tmp_path / "out")
    for name in ("synth-small-s08", "manual-compact-s08"):
        assert {f"{name}/summary.json", f"{name}/calls.csv", f"{name}/chart.svg"} <= set(written)
        doc = orjson.loads(written[f"{name}/summary.json"])
        assert doc["summary"]["policy"] == "s08"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # nothing staged left beside it
    assert all(not always for _, always in said)


def test_a_dry_run_writes_nothing_and_an_unknown_model_is_said_even_quietly(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    said: list[tuple[str, bool]] = []
    settings = ReplaySettings(policy=load_policy("none"), dry_run=True, price_model="no-such-model")
    done = replay_files([str(SAMPLES / "synth-small.jsonl")], settings, lambda m, a: said.append((m, a)))
    assert len(done.runs) == 1 and done.runs[0].out_dir is None and list(tmp_path.iterdir()) == []
    assert [a for m, a in said if "no prices for model 'no-such-model'" in m] == [True]


def test_compare_files_is_the_whole_of_compare_as_one_call(tmp_path):
    """(#26 §2) The library call runs the grid (with no compaction added as the reference), shows
    the verdict before the charts, owns its folder and says how it ended."""
    from compactlab.jobs.base import Settings
    from compactlab.jobs.compare import Grid, Reporting, compare_files

    shown, said = [], []
    files = [str(SAMPLES / "synth-small.jsonl"), str(SAMPLES / "synth-medium.jsonl")]
    done = compare_files(files, Grid(policies=["s08"]), Settings(out_dir=str(tmp_path / "cmp"), jobs=1),
                         Reporting(charts="none"), shown.append, lambda m, always: said.append(m))
    assert done.outcome.status == 0 and done.outcome.errors == []
    assert done.outcome.wrote.startswith(f"wrote {tmp_path / 'cmp'}/: results.csv, results.json")
    assert shown == [done.comparison] and done.comparison.verdict.reference == "none"
    assert {r.policy for r in done.grid.results} == {"s08", "none"} and len(done.grid.results) == 4
    assert {"results.csv", "results.json", "report.md", "report.html"} <= set(files_under(tmp_path / "cmp"))
    from compactlab.core import chosen

    said = f"Replayed on the {chosen()} core."  # (#59: the reports say which core ran)
    assert said in (tmp_path / "cmp" / "report.md").read_text() and said in (tmp_path / "cmp" / "report.html").read_text()
    runs, written = done.comparison.runs, read_csv(tmp_path / "cmp" / "results.csv")
    assert len(runs) == 4 and runs.names() == list(written[0])  # results.csv's rows, in its order
    assert [str(c) for c in runs["cost_usd"]] == [r["cost_usd"] for r in written]


def test_check_files_writes_then_holds_the_runs_to_the_baseline(tmp_path):
    from compactlab.jobs.base import Settings
    from compactlab.jobs.check import Gate, check_files

    files = [str(SAMPLES / "synth-small.jsonl")]
    baseline = str(tmp_path / "baseline.json")
    wrote = check_files(files, Gate(baseline=baseline, update=True), Settings(jobs=1))
    assert wrote.results == [] and wrote.outcome.wrote == f"wrote {baseline}: 1 record(s)"
    checked = check_files(files, Gate(baseline=baseline), Settings(jobs=1))
    assert [(r.policy, r.status, r.ok) for r in checked.results] == [("s08", "pass", True)]
    assert checked.outcome.status == 0
    worse = check_files(files, Gate(baseline=baseline, policies=["none"]), Settings(jobs=1))
    assert worse.outcome.status == 1 and worse.results[0].status == "missing"


def test_every_command_is_parse_one_call_one_writer():
    """(#26 §2) No function of the command line (``compactlab/cli/``) is over 40 lines (its
    decorators aside)."""
    import ast

    from helpers import ROOT

    modules = sorted((ROOT / "compactlab" / "cli").glob("*.py"))
    assert len(modules) > 10  # (the package, its common options and a module a command)
    long = {f"{path.stem}.{f.name}": f.end_lineno - f.lineno + 1 for path in modules
            for f in ast.walk(ast.parse(path.read_text()))
            if isinstance(f, ast.FunctionDef) and f.end_lineno - f.lineno + 1 > 40}
    assert not long, long

"""runs.replay_files: what `compactlab replay` does, as one library call."""

from __future__ import annotations

import orjson

from compactlab.engine.policy import load_policy
from compactlab.runs import ReplaySettings, replay_files
from helpers import SAMPLES, files_under


def test_replay_files_owns_the_output_folder_from_start_to_end(tmp_path):
    said: list[tuple[str, bool]] = []
    files = [str(SAMPLES / "synth-small.jsonl"), str(SAMPLES / "manual-compact.jsonl")]
    settings = ReplaySettings(policy=load_policy("s08"), out_dir=str(tmp_path / "out"), chart=True)
    done = replay_files(files, settings, lambda message, always: said.append((message, always)))
    assert [r.summary.transcript for r in done.runs] == files and done.interrupted is None
    assert done.folder == str(tmp_path / "out") and done.total == 2
    written = files_under(tmp_path / "out")
    for name in ("synth-small-s08", "manual-compact-s08"):
        assert {f"{name}/summary.json", f"{name}/calls.csv", f"{name}/chart.png"} <= set(written)
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

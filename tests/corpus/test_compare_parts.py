"""A corpus is read in parts (#32 §1): the command's process holds one part's transcripts at a
time, and the results are those of reading it whole."""

from __future__ import annotations

import json

from helpers import SAMPLES, sample_corpus


def test_a_corpus_read_in_parts_gives_the_results_of_reading_it_whole(cli, tmp_path, monkeypatch):
    from compactlab.jobs import base as compare

    folder = sample_corpus(tmp_path / "corpus", "synth-small.jsonl", "manual-compact.jsonl", "parallel-batch.jsonl",
                           "recorded-orphan.jsonl", "huge-batch.jsonl")  # (notes.json: no transcript, in the middle)
    args = ["compare", folder, "-p", "s08", "-p", "s06", "--dry-run", "--format", "json", "--jobs", "1"]
    whole = cli(*args)
    assert whole.exit_code == 0, whole.stderr
    assert len(compare.parts_of([str(p) for p in sorted(folder.iterdir())])) == 1
    monkeypatch.setattr(compare, "PART_FILES", 2)
    assert [len(p) for p in compare.parts_of([str(p) for p in sorted(folder.iterdir())])] == [2, 2, 2]
    parts = cli(*args)
    assert parts.exit_code == 0, parts.stderr
    assert json.loads(parts.stdout) == json.loads(whole.stdout)
    assert parts.stderr.count("skipped 1 file(s)") == 1 and parts.stderr == whole.stderr  # said once, as whole


def test_check_reads_in_parts_too(cli, tmp_path, monkeypatch):
    from compactlab.jobs import base

    files = [SAMPLES / n for n in ("synth-small.jsonl", "manual-compact.jsonl", "parallel-batch.jsonl")]
    baseline = tmp_path / "b.json"
    assert cli("check", *files, "-p", "s08", "--baseline", baseline, "--update-baseline").exit_code == 0
    monkeypatch.setattr(base, "PART_FILES", 1)
    r = cli("check", *files, "-p", "s08", "--baseline", baseline, "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert [x["status"] for x in json.loads(r.stdout)["results"]] == ["pass"] * 3

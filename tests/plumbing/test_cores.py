"""The cores compactlab may use (#32 §3): the CPU affinity and the cgroup's quota, not the
machine's count; with one there is no read-ahead process and --jobs defaults to 1."""

from __future__ import annotations

import os

from compactlab.plumbing import process


def test_the_affinity_and_the_cgroup_quota_bound_the_cores(tmp_path, monkeypatch):
    v2, v1 = tmp_path / "cpu.max", tmp_path / "cpu" / "cpu.cfs_quota_us"
    monkeypatch.setattr(process, "CGROUP_FILES", (str(v2), str(v1)))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    assert process.usable_cores() == 4  # no cgroup file: the affinity
    v2.write_text("max 100000\n")
    assert process.usable_cores() == 4  # no quota
    v2.write_text("150000 100000\n")
    assert process.usable_cores() == 1  # 1.5 cores: one to count on
    v2.write_text("800000 100000\n")
    assert process.usable_cores() == 4  # a quota above the affinity: the affinity
    v2.unlink()
    v1.parent.mkdir()
    v1.write_text("200000\n")
    (v1.parent / "cpu.cfs_period_us").write_text("100000\n")
    assert process.usable_cores() == 2  # cgroup v1
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert process.usable_cores() == 1  # taskset -c 0


def test_one_usable_core_means_no_reader_and_one_job(tmp_path, monkeypatch):
    from compactlab.corpus import compare
    from compactlab.engine.feeds import read_ahead

    monkeypatch.delenv("COMPACTLAB_READ_AHEAD", raising=False)
    big = tmp_path / "big.jsonl"
    big.write_bytes(b" " * read_ahead.MIN_BYTES)
    monkeypatch.setattr(read_ahead, "usable_cores", lambda: 1)
    assert not read_ahead.usable(str(big))
    monkeypatch.setattr(read_ahead, "usable_cores", lambda: 2)
    assert read_ahead.usable(str(big))
    seen = []
    monkeypatch.setattr(compare, "usable_cores", lambda: seen.append(1) or 1)
    from compactlab import load_policy, load_transcript
    from helpers import SAMPLES

    t = load_transcript(str(SAMPLES / "synth-small.jsonl"))
    done = compare.run_jobs([t], [compare.Job(0, 0, load_policy("s08"), ())])
    assert seen and len(done.results) == 1  # the default --jobs came from the usable cores: 1, in-process

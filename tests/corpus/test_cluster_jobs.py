"""A compare on a cluster whose workers read the files (#59 §5): the command reads none of them
and says what a local compare says, in the same order, whatever order the batches come back in;
an unreadable input, a lost batch and an interrupt end it as they end a local compare. A stand-in
cluster runs the batches in this process (Dask's own is tested in test_scale.py)."""

from __future__ import annotations

import json
import shutil

import pytest

from helpers import SAMPLES, sample_corpus


class InProcess:
    """A cluster stand-in: every batch run here, handed back last first; ``lose`` its batches whose
    worker is lost, ``stop_after`` how many come back before an interrupt."""

    threads = 2

    def __init__(self, executor: str, lose: tuple[int, ...] = (), stop_after: int | None = None) -> None:
        self.lose, self.stop_after = lose, stop_after

    def __enter__(self) -> "InProcess":
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def shares(self, paths: list[str]) -> bool:
        return True

    def batches(self, items):
        from compactlab.corpus.compare import in_batches

        return in_batches(items, self.threads)

    def each(self, work, batches, *args):
        for n, i in enumerate(reversed(range(len(batches)))):
            if n == self.stop_after:
                raise KeyboardInterrupt
            yield i, (RuntimeError("worker lost") if i in self.lose else work(batches[i], *args))


@pytest.fixture
def corpus(tmp_path):
    folder = sample_corpus(tmp_path / "corpus", "synth-small.jsonl", "manual-compact.jsonl", "parallel-batch.jsonl",
                           "recorded-orphan.jsonl", "synth-medium.jsonl", not_a_transcript="m-notes.json")
    bad = (SAMPLES / "synth-small.jsonl").read_text() + "{not json\n"
    (folder / "p-bad-lines.jsonl").write_text(bad)  # (a bad line, skipped and said)
    return folder


def _on(monkeypatch, stand_in):
    from compactlab.jobs import cluster

    monkeypatch.setattr(cluster, "Cluster", stand_in)


@pytest.mark.parametrize("part_files", [100, 2])
def test_a_cluster_compare_says_and_gives_what_a_local_one_does(cli, corpus, monkeypatch, part_files):
    from compactlab.jobs import base

    monkeypatch.setattr(base, "PART_FILES", part_files)  # (said a part at a time, as read locally)
    args = ["compare", corpus, "-p", "s08", "-p", "s06", "--dry-run", "--format", "json", "--skip-bad-lines", "-v",
            "--price-model", "no-such-model"]
    local = cli(*args, "--jobs", "1")
    assert local.exit_code == 0, local.stderr
    assert "skipped 1 bad line" in local.stderr and "m-notes.json" in local.stderr and "no-such-model" in local.stderr
    _on(monkeypatch, InProcess)
    monkeypatch.setattr(base, "load_all", None)  # (the command reads nothing)
    on = cli(*args, "--executor", "dask://127.0.0.1:1")
    assert on.exit_code == 0, on.stderr
    assert json.loads(on.stdout) == json.loads(local.stdout)
    assert on.stderr == local.stderr


def test_a_cluster_compare_of_unknown_models_warns_once_each_as_locally(cli, tmp_path, monkeypatch):
    folder = tmp_path / "c"
    folder.mkdir()
    line = (SAMPLES / "synth-small.jsonl").read_text().splitlines()
    for i, model in enumerate(("made-up-1", "made-up-2", "made-up-1")):
        (folder / f"{i}.jsonl").write_text("\n".join(
            [json.dumps({**json.loads(ln), "model": model}) if '"assistant"' in ln else ln for ln in line]) + "\n")
    args = ["compare", folder, "-p", "s08", "--dry-run", "--format", "json"]
    local = cli(*args, "--jobs", "1")
    _on(monkeypatch, InProcess)
    on = cli(*args, "--executor", "dask://127.0.0.1:1")
    assert on.exit_code == local.exit_code == 0 and on.stderr == local.stderr
    assert json.loads(on.stdout) == json.loads(local.stdout)


def test_the_first_unreadable_input_in_order_ends_a_cluster_compare_as_locally(cli, corpus, tmp_path, monkeypatch):
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    shutil.copy(corpus / "p-bad-lines.jsonl", one)  # (a bad line, not skipped: an input error)
    shutil.copy(corpus / "p-bad-lines.jsonl", two)
    files = [corpus / "synth-small.jsonl", one, corpus / "manual-compact.jsonl", two]
    local = cli("compare", *files, "-p", "s08", "--dry-run", "--jobs", "1")
    _on(monkeypatch, InProcess)  # (two's batch comes back first)
    on = cli("compare", *files, "-p", "s08", "--dry-run", "--executor", "dask://127.0.0.1:1")
    assert on.exit_code == local.exit_code == 2 and "one.jsonl" in on.stderr and "two.jsonl" not in on.stderr
    assert on.stderr == local.stderr


def test_a_lost_batch_fails_its_files_runs_and_the_others_are_kept(cli, corpus, monkeypatch):
    _on(monkeypatch, lambda executor: InProcess(executor, lose=(1,)))  # (a file a batch: manual-compact.jsonl's)
    r = cli("compare", corpus, "-p", "s08", "--dry-run", "--format", "json", "--skip-bad-lines",
            "--executor", "dask://127.0.0.1:1")
    out = json.loads(r.stdout)
    failed = [line for line in r.stderr.splitlines() if "worker lost" in line]
    assert r.exit_code == 1 and failed and all("failed" in line for line in failed)
    assert out["runs"] and all("manual-compact.jsonl" in line for line in failed)  # (its runs failed, named)
    assert all("manual-compact" not in run["transcript"] for run in out["runs"])


def test_a_lost_batch_of_a_folder_s_file_that_is_no_transcript_skips_it_as_locally(cli, corpus, monkeypatch):
    """A folder's file that is no transcript is skipped, not counted a failed run, when its batch is
    lost (the command reads its head); the lost transcript's runs fail, named."""
    args = ["compare", corpus, "-p", "s08", "--dry-run", "--format", "json", "--skip-bad-lines", "-v"]
    local = cli(*args, "--jobs", "1")
    skipped = [line for line in local.stderr.splitlines() if "m-notes.json" in line or "not transcripts" in line]
    assert len(skipped) == 2
    _on(monkeypatch, lambda executor: InProcess(executor, lose=(0, 1)))  # (m-notes.json's and manual-compact's)
    r = cli(*args, "--executor", "dask://127.0.0.1:1")
    failed = [line for line in r.stderr.splitlines() if "worker lost" in line]
    assert r.exit_code == 1 and failed and all("manual-compact.jsonl" in line for line in failed)
    assert [line for line in r.stderr.splitlines() if "m-notes.json" in line or "not transcripts" in line] == skipped


def test_an_interrupted_cluster_compare_keeps_the_batches_back(cli, corpus, tmp_path, monkeypatch):
    local = cli("compare", corpus, "-p", "s08", "--dry-run", "--format", "json", "--skip-bad-lines", "--jobs", "1")
    _on(monkeypatch, lambda executor: InProcess(executor, stop_after=2))
    out = tmp_path / "out"
    r = cli("compare", corpus, "-p", "s08", "--skip-bad-lines", "--out", out, "--executor", "dask://127.0.0.1:1")
    assert r.exit_code == 130, r.stderr
    assert "interrupted" in r.stderr and "runs finished" in r.stderr
    kept = {(x["transcript"], x["policy"]) for x in json.loads((out / "results.json").read_text())["runs"]}
    assert kept and kept < {(x["transcript"], x["policy"]) for x in json.loads(local.stdout)["runs"]}


def test_a_calibration_that_cannot_be_made_ends_a_cluster_compare_as_locally(cli, corpus, monkeypatch):
    """``--calibrate`` on files that record no usage: the same error, after the same lines."""
    args = ["compare", corpus, "-p", "s08", "--calibrate", "--skip-bad-lines", "--dry-run", "-v"]
    local = cli(*args, "--jobs", "1")
    assert local.exit_code == 2 and "no recorded usage to calibrate on" in local.stderr
    _on(monkeypatch, InProcess)
    on = cli(*args, "--executor", "dask://127.0.0.1:1")
    assert on.exit_code == 2 and on.stderr == local.stderr


def test_an_interrupt_stays_the_end_when_an_unreadable_input_is_among_the_batches_back(cli, corpus, tmp_path,
                                                                                      monkeypatch):
    bad = tmp_path / "bad.jsonl"
    shutil.copy(corpus / "p-bad-lines.jsonl", bad)  # (a bad line, not skipped: an input error)
    _on(monkeypatch, lambda executor: InProcess(executor, stop_after=1))  # (only the last batch back: bad's)
    r = cli("compare", corpus / "synth-small.jsonl", corpus / "manual-compact.jsonl", bad, "-p", "s08",
            "--dry-run", "--executor", "dask://127.0.0.1:1")
    assert r.exit_code == 130, r.stderr
    assert "bad line" not in r.stderr


# -- the command's own workers reading the files (LocalWorkers) --------------------------------------


def _local(monkeypatch, per_worker: int = 2) -> None:
    """A local compare of the fixture's corpus (7 files) on 2 workers that read the files: the
    command reads none of them (``load_all`` gone, ``run_in_parts`` not taken)."""
    from compactlab.jobs import base, cluster

    monkeypatch.setattr(cluster, "FILES_PER_WORKER", per_worker)
    monkeypatch.setattr(base, "load_all", None)
    monkeypatch.setattr(cluster, "run_in_parts", lambda *a, **k: pytest.fail("the command read the files"))


@pytest.mark.parametrize("part_files", [100, 2])
def test_a_local_compare_whose_workers_read_the_files_says_and_gives_what_one_process_does(cli, corpus, monkeypatch,
                                                                                          part_files):
    from compactlab.jobs import base

    monkeypatch.setattr(base, "PART_FILES", part_files)
    args = ["compare", corpus, "-p", "s08", "-p", "s06", "--dry-run", "--format", "json", "--skip-bad-lines", "-v",
            "--price-model", "no-such-model"]
    local = cli(*args, "--jobs", "1")
    assert local.exit_code == 0, local.stderr
    _local(monkeypatch)
    on = cli(*args, "--jobs", "2")
    assert on.exit_code == 0, on.stderr
    assert json.loads(on.stdout) == json.loads(local.stdout)
    assert on.stderr == local.stderr


def test_a_local_worker_killed_fails_its_file_s_runs_and_the_others_are_kept(cli, corpus, monkeypatch):
    import os
    import signal

    from compactlab.jobs import cluster

    real = cluster._run_file

    def dies_on_manual_compact(given, path, *args):
        if "manual-compact" in given:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(given, path, *args)

    local = cli("compare", corpus, "-p", "s08", "-p", "s06", "--dry-run", "--format", "json", "--skip-bad-lines",
                "--jobs", "1")
    _local(monkeypatch)
    monkeypatch.setattr(cluster, "_run_file", dies_on_manual_compact)  # (inherited by the forked workers)
    r = cli("compare", corpus, "-p", "s08", "-p", "s06", "--dry-run", "--format", "json", "--skip-bad-lines",
            "--jobs", "2")
    failed = [line for line in r.stderr.splitlines() if "failed:" in line]
    assert r.exit_code == 1, r.stderr
    assert len(failed) == 3 and all("manual-compact.jsonl" in line and line.endswith(  # (s08, s06 and none)
        "failed: the worker process was killed (SIGKILL)") for line in failed), r.stderr
    kept = json.loads(r.stdout)["runs"]
    assert kept == [run for run in json.loads(local.stdout)["runs"] if "manual-compact" not in run["transcript"]]


@pytest.mark.parametrize("jobs, files, read_by_workers", [(2, 8, True), (2, 7, False), (1, 50, False),
                                                           (3, 12, True), (3, 11, False)])
def test_a_local_corpus_is_read_by_the_workers_where_it_has_files_enough_for_each(monkeypatch, jobs, files,
                                                                                 read_by_workers):
    from compactlab.jobs import cluster
    from compactlab.jobs.base import Settings

    took = []
    monkeypatch.setattr(cluster, "run_on_workers", lambda workers, *a: took.append(workers.threads))
    monkeypatch.setattr(cluster, "run_in_parts", lambda *a: took.append("here"))
    cluster.run_corpus([f"f{i}" for i in range(files)], [], Settings(jobs=jobs), print, print)
    assert took == ([jobs] if read_by_workers else ["here"])


def test_a_local_worker_collects_between_its_files_and_pauses_the_collector_while_it_reads_one():
    import gc

    from compactlab.jobs.cluster import LocalWorkers
    from compactlab.plumbing.process import collector_paused

    def work(batch, flag):
        before = gc.isenabled()
        with collector_paused():
            inside = gc.isenabled()
        return [before, inside, gc.isenabled(), flag, batch]

    enabled = gc.isenabled()
    gc.disable()  # (as the command's process has it: process.start)
    try:
        got = dict(LocalWorkers(2).each(work, [["a"], ["b"], ["c"]], "x"))
    finally:
        if enabled:
            gc.enable()
    assert got == {0: [True, False, True, "x", ["a"]], 1: [True, False, True, "x", ["b"]],
                   2: [True, False, True, "x", ["c"]]}


def test_a_workers_task_reads_and_runs_its_files_with_the_allocator_kept(monkeypatch):
    """(#59 §5) On a Dask worker (MALLOC_TRIM_THRESHOLD_=65536, from its nanny) every buffer a
    file's reading freed was faulted in again at the next: a task keeps them (``allocator_kept``)."""
    from compactlab import load_policy
    from compactlab.jobs import cluster
    from compactlab.jobs.base import Settings
    from compactlab.plumbing import process

    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    calls: list[tuple] = []
    monkeypatch.setattr(process, "_glibc", lambda: type("Libc", (), {
        "mallopt": lambda self, *a: calls.append(a), "malloc_trim": lambda self, *a: calls.append(a)})())
    inside: list[int] = []
    real = cluster._run_file
    monkeypatch.setattr(cluster, "_run_file", lambda *a: inside.append(process.allocator_kept._inside) or real(*a))
    path = str(SAMPLES / "synth-small.jsonl")
    done = cluster.run_files([(path, path)] * 2, [(load_policy("s08"), ())], cluster.reading_of(Settings(dry_run=True)))
    assert [len(f.runs) for f in done] == [1, 1] and inside == [1, 1]
    assert process.allocator_kept._inside == 0 and len(calls) == 5 and calls[-1] == (0,)


def test_a_local_worker_builds_its_summarizer_once_for_all_its_files(cli, corpus, tmp_path, monkeypatch):
    """(a live summarizer's client is kept for the worker's next files, as a worker of a part's runs
    keeps it)"""
    import os

    from compactlab import summarizers

    log = tmp_path / "built.log"
    real = summarizers.build_summarizer

    def logged(*args):
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\n")
        return real(*args)

    monkeypatch.setattr(summarizers, "build_summarizer", logged)  # (inherited by the forked workers)
    _local(monkeypatch)
    r = cli("compare", corpus, "-p", "s08", "--dry-run", "--skip-bad-lines", "--jobs", "2")
    assert r.exit_code == 0, r.stderr
    built = log.read_text().split()
    assert len(built) == len(set(built)) == 2  # (two workers, one each, for the corpus's 7 files)

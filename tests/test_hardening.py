"""Output safety and interrupts (SPEC §11): clear errors, no partial reports, finished rows kept."""

from __future__ import annotations

import errno
import json

import pytest

from fake_anthropic import FakeAPI
from helpers import SAMPLES, read_csv

SMALL = SAMPLES / "synth-small.jsonl"


def leftovers(folder) -> list[str]:
    return [p.name for p in folder.rglob("*") if p.name.endswith(".tmp") or p.name.startswith(".compactlab-probe")]


def test_out_inside_a_file_is_a_clear_error(cli, tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    r = cli("replay", SMALL, "--out", f / "sub")
    assert r.exit_code == 2 and r.stderr.startswith(f"error: --out {f / 'sub'}: cannot create folder")
    r = cli("compare", SMALL, "-p", "s08", "--out", f)
    assert r.exit_code == 2 and "exists and is not a folder" in r.stderr


def test_a_full_disk_leaves_no_partial_report(cli, tmp_path, monkeypatch):
    import compactlab.plumbing.outputs as outputs

    import os

    real_mkstemp, real_open = outputs.mkstemp, os.open

    def full(directory, prefix, *args, **kw):  # summary.json went through; calls.csv does not fit
        if prefix.startswith(".calls.csv"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_mkstemp(directory, prefix, *args, **kw)

    def full_open(path, flags, *args, **kw):  # (a new file is made where it goes: it does not fit either)
        if os.path.basename(path) == "calls.csv" and flags & os.O_CREAT:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_open(path, flags, *args, **kw)

    monkeypatch.setattr(outputs, "mkstemp", full)
    monkeypatch.setattr(os, "open", full_open)
    out = tmp_path / "out"
    r = cli("replay", SMALL, "--out", out)
    assert r.exit_code == 1  # (#56 §5: a run that failed, as a crash is)
    assert r.stderr.splitlines()[0] == f"error: {out}: cannot write calls.csv: no space left on the device"
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no half run, nothing staged left beside it


def test_a_failing_write_leaves_the_destination_as_it_was(tmp_path, monkeypatch):
    from compactlab.errors import DiskFull
    from compactlab.plumbing.outputs import OutputDir

    earlier = OutputDir(tmp_path / "o")
    earlier.write_all({"a.txt": b"old"})
    earlier.commit()
    od = OutputDir(tmp_path / "o")
    import compactlab.plumbing.outputs as outputs

    real_write = outputs._write

    def fail_b(f, data):  # (the one way a file is written: the disk fills up while writing b.txt)
        if data == b"b":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(f, data)

    monkeypatch.setattr(outputs, "_write", fail_b)
    with pytest.raises(DiskFull, match="cannot write b.txt: no space left on the device"):
        od.write_all({"a.txt": b"new", "b.txt": b"b"})
    od.rollback()
    assert (tmp_path / "o" / "a.txt").read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["o"]


def test_ctrl_c_in_compare_keeps_the_finished_rows(cli, tmp_path, monkeypatch):
    import compactlab.corpus.compare as compare

    real = compare.GridContext.run
    seen = []

    def run(self, job):
        if len(seen) == 2:
            raise KeyboardInterrupt
        seen.append(job.index)
        return real(self, job)

    monkeypatch.setattr(compare.GridContext, "run", run)
    out = tmp_path / "cmp"
    r = cli("compare", SMALL, "-p", "none", "-p", "s06", "-p", "s08", "--jobs", "1", "--out", out)
    assert r.exit_code == 130 and "interrupted: 2 of 3 runs finished" in r.stderr
    assert len(read_csv(out / "results.csv")) == 2
    assert "Interrupted: 2 of 3 runs" in (out / "report.md").read_text()
    assert leftovers(out) == []


@pytest.mark.parametrize("signal_exc, status", [("KeyboardInterrupt", 130), ("Terminated", 143)])
def test_ctrl_c_while_charts_are_drawn_keeps_every_finished_run(cli, tmp_path, monkeypatch, signal_exc, status):
    """(#25 §4) The runs all finished; the signal lands while charts are drawn: results.csv and
    results.json (the verdict) are in place, the missing charts and reports are named, 130/143;
    a rerun replaces that folder whole (it is compactlab's)."""
    import compactlab.reports.compare_report as compare_report
    from compactlab.plumbing.interrupts import Terminated

    stop = KeyboardInterrupt if signal_exc == "KeyboardInterrupt" else Terminated

    def drawing(*args, **kwargs):
        raise stop()

    monkeypatch.setattr(compare_report, "draw_charts", drawing)
    out = tmp_path / "cmp"
    r = cli("compare", SMALL, "-p", "none", "-p", "s08", "--jobs", "1", "--out", out)
    assert r.exit_code == status, r.output
    assert "interrupted while drawing: results.csv and results.json are in" in r.stderr
    assert "report.md, report.html and" in r.stderr and "are missing" in r.stderr
    assert len(read_csv(out / "results.csv")) == 2
    assert json.loads((out / "results.json").read_text())["verdict"]
    assert not (out / "report.md").exists() and leftovers(out) == []
    assert r.stdout.startswith("verdict over 1 transcript(s)") and "Use none" in r.stdout  # printed before drawing
    monkeypatch.undo()
    again = cli("compare", SMALL, "-p", "none", "-p", "s08", "--jobs", "1", "--out", out)
    assert again.exit_code == 0, again.output
    assert (out / "report.md").exists() and (out / "report.html").exists()


def test_ctrl_c_before_any_run_finished_writes_nothing(cli, tmp_path, monkeypatch):
    import compactlab.corpus.compare as compare

    monkeypatch.setattr(compare.GridContext, "run", lambda self, job: (_ for _ in ()).throw(KeyboardInterrupt))
    r = cli("compare", SMALL, "-p", "s08", "--jobs", "1", "--out", tmp_path / "cmp")
    assert r.exit_code == 130 and "nothing written" in r.stderr
    assert not (tmp_path / "cmp").exists()


def test_a_rerun_after_an_interrupt_reuses_the_cached_summaries(cli, tmp_path, monkeypatch):
    api = FakeAPI()
    url, server = api.serve()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    try:
        t = SAMPLES / "synth-medium.jsonl"
        args = ["compare", t, "-p", "s08", "-p", "s06", "--summarizer", "anthropic", "--jobs", "1", "--out",
                tmp_path / "cmp"]
        cli(*args, "--cache-dir", tmp_path / "cold")
        cold = len(api.message_requests)  # what the whole grid asks for
        import compactlab.corpus.compare as compare

        real = compare.GridContext.run
        done = []

        def run(self, job):
            if done:
                raise KeyboardInterrupt
            done.append(1)
            return real(self, job)

        monkeypatch.setattr(compare.GridContext, "run", run)
        r = cli(*args, "--cache-dir", tmp_path / "warm")
        assert r.exit_code == 130
        first = len(api.message_requests) - cold
        monkeypatch.setattr(compare.GridContext, "run", real)
        assert cli(*args, "--cache-dir", tmp_path / "warm").exit_code == 0
        rerun = len(api.message_requests) - cold - first
        assert 0 < first < cold and rerun == cold - first  # the interrupted run's summaries came from the cache
    finally:
        server.shutdown()


@pytest.fixture
def full_disk(tmp_path):
    """A small tmpfs of the test's own (``helpers.mounted_tmpfs``)."""
    from helpers import mounted_tmpfs

    with mounted_tmpfs(tmp_path / "disk", "size=16k") as where:
        yield where


@pytest.mark.parametrize("job", ["replay", "replay --chart", "compare"])
@pytest.mark.parametrize("filled", [True, False])
def test_a_full_disk_is_a_one_line_error_that_leaves_nothing(cli, full_disk, job, filled):
    """(#56 §5) The disk full (before the lock could be written, or part way through the reports):
    exit 1, one line and a hint, no lock, no partial folder (an internal error and a lock file
    were left before)."""
    if filled:
        (full_disk / "fill").write_bytes(b"x" * (16 << 10))  # (every block taken)
    command, *more = job.split()
    r = cli(command, SAMPLES / "synth-medium.jsonl", "-p", "s08", *more, "-o", full_disk / "out", "-q")
    assert r.exit_code == 1, r.stderr
    assert "no space left on the device" in r.stderr and "internal error" not in r.stderr, r.stderr
    assert r.stderr.count("\n") <= 2, r.stderr
    assert sorted(p.name for p in full_disk.iterdir()) == (["fill"] if filled else [])

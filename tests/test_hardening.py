"""Output safety and interrupts (SPEC §11): clear errors, no partial reports, finished rows kept."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from fake_anthropic import FakeAPI
from helpers import ROOT, SAMPLES

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
    import compactlab.outputs as outputs

    real_replace = os.replace

    def full(src, dst):
        if str(dst).endswith("calls.csv"):  # summary.json went through; calls.csv does not fit
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_replace(src, dst)

    monkeypatch.setattr(outputs.os, "replace", full)
    out = tmp_path / "out"
    r = cli("replay", SMALL, "--out", out)
    assert r.exit_code == 2
    assert r.stderr.splitlines()[0] == f"error: {out}: cannot write calls.csv: No space left on device"
    assert not (out / "summary.json").exists() or (out / "summary.json").stat().st_size > 0
    assert leftovers(out) == []
    monkeypatch.undo()


def test_a_failing_write_stages_nothing(tmp_path, monkeypatch):
    from compactlab.errors import UsageError
    from compactlab.outputs import OutputDir

    od = OutputDir(tmp_path)
    real_fdopen = os.fdopen
    calls = []

    def fdopen(fd, mode):
        calls.append(fd)
        if len(calls) == 2:
            os.close(fd)
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_fdopen(fd, mode)

    import compactlab.outputs as outputs

    monkeypatch.setattr(outputs.os, "fdopen", fdopen)
    with pytest.raises(UsageError, match="cannot write b.txt: No space left on device"):
        od.write_all({"a.txt": b"a", "b.txt": b"b"})
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # not even a.txt


def test_ctrl_c_in_compare_keeps_the_finished_rows(cli, tmp_path, monkeypatch):
    import compactlab.compare as compare

    real = compare._run
    seen = []

    def run(job):
        if len(seen) == 2:
            raise KeyboardInterrupt
        seen.append(job.index)
        return real(job)

    monkeypatch.setattr(compare, "_run", run)
    out = tmp_path / "cmp"
    r = cli("compare", SMALL, "-p", "none", "-p", "s06", "-p", "s08", "--jobs", "1", "--out", out)
    assert r.exit_code == 130 and "interrupted: 2 of 3 runs finished" in r.stderr
    assert len(pd.read_csv(out / "results.csv")) == 2
    assert "Interrupted: 2 of 3 runs" in (out / "report.md").read_text()
    assert leftovers(out) == []


def test_ctrl_c_before_any_run_finished_writes_nothing(cli, tmp_path, monkeypatch):
    import compactlab.compare as compare

    monkeypatch.setattr(compare, "_run", lambda job: (_ for _ in ()).throw(KeyboardInterrupt))
    r = cli("compare", SMALL, "-p", "s08", "--jobs", "1", "--out", tmp_path / "cmp")
    assert r.exit_code == 130 and "nothing written" in r.stderr
    assert list((tmp_path / "cmp").iterdir()) == []


def test_a_real_sigint_to_a_parallel_compare(tmp_path):
    from compactlab.synth import write

    big = tmp_path / "big.jsonl"
    write(big, 2500, seed=4)
    out = tmp_path / "cmp"
    proc = subprocess.Popen([sys.executable, "-m", "compactlab", "compare", str(big), "-p", "s08", "--sweep",
                             "summary.trigger=10000,20000,30000,40000,50000,60000,70000,80000", "--sweep",
                             "micro.keep_recent=2,4", "--jobs", "2",
                             "--out", str(out), "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    time.sleep(1.5)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    text = stderr.decode()
    assert proc.returncode in (0, 130), text  # 0: it had already finished
    assert "Traceback" not in text
    assert leftovers(out) == []
    if proc.returncode == 130:
        assert text.startswith("error: interrupted")
        if (out / "results.csv").exists():
            n = len(pd.read_csv(out / "results.csv"))
            assert 1 <= n < 16 and f"{n} of 16 runs" in (out / "report.md").read_text()


def test_a_rerun_after_an_interrupt_reuses_the_cached_summaries(cli, tmp_path, monkeypatch):
    api = FakeAPI()
    url, server = api.serve()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    try:
        t = SAMPLES / "synth-medium.jsonl"
        args = ["compare", t, "-p", "s08", "-p", "s06", "--summarizer", "anthropic", "--jobs", "1", "--dry-run"]
        cli(*args, "--cache-dir", tmp_path / "cold")
        cold = len(api.message_requests)  # what the whole grid asks for
        import compactlab.compare as compare

        real = compare._run
        done = []

        def run(job):
            if done:
                raise KeyboardInterrupt
            done.append(1)
            return real(job)

        monkeypatch.setattr(compare, "_run", run)
        r = cli(*args, "--cache-dir", tmp_path / "warm")
        assert r.exit_code == 130
        first = len(api.message_requests) - cold
        monkeypatch.setattr(compare, "_run", real)
        assert cli(*args, "--cache-dir", tmp_path / "warm").exit_code == 0
        rerun = len(api.message_requests) - cold - first
        assert 0 < first < cold and rerun == cold - first  # the interrupted run's summaries came from the cache
    finally:
        server.shutdown()

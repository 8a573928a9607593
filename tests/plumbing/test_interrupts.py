"""SIGINT and SIGTERM end every command the same way (issue 15 §1), with no race.

Each real-signal test holds the runs at the fake API's gate and waits until the program has
asked for a summary there (so it is certainly mid-run, its output folder staged, its workers or
reader alive) before it sends the signal: nothing here waits on a sleep or on a folder appearing.
"""

from __future__ import annotations

import os
import signal
import time
import subprocess
import sys

import pytest

from fake_anthropic import FakeAPI
from helpers import ROOT, SAMPLES, read_csv


@pytest.fixture
def api():
    fake = FakeAPI()
    url, server = fake.serve()
    fake.url = url
    fake.hold()
    yield fake
    fake.release()
    server.shutdown()


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    from compactlab.synth import write

    path = tmp_path_factory.mktemp("big") / "big.jsonl"
    write(path, 5000, seed=5)  # 55 MB: more facts than the reader's pipe holds; s08 summarises early
    return path


def start(args: list, cwd, api: FakeAPI, *, ignore_sigint: bool = False, **env: str) -> subprocess.Popen:
    def child() -> None:
        # as `nohup cmd &` starts it, or else as a terminal does: SIGINT at its default even when
        # pytest itself was started with it ignored (which the child would inherit)
        signal.signal(signal.SIGINT, signal.SIG_IGN if ignore_sigint else signal.SIG_DFL)

    return subprocess.Popen([sys.executable, "-m", "compactlab", *map(str, args), "--summarizer", "anthropic",
                             "--no-cache"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "ANTHROPIC_API_KEY": "sk-test",
                                 "ANTHROPIC_BASE_URL": api.url, **env},
                            start_new_session=True, preexec_fn=child)


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry))
    return out


def state(pid: int) -> str:
    """R, S, D, Z (a zombie: it has exited), ... from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def finish(proc: subprocess.Popen, api: FakeAPI) -> str:
    api.release()  # whatever still waits at the gate may go on: a correct program has stopped asking
    _, stderr = proc.communicate(timeout=120)
    text = stderr.decode()
    assert "Traceback" not in text, text
    return text


def send(proc: subprocess.Popen, sig: int) -> None:
    """SIGINT as a terminal's Ctrl-C sends it (to every process of the group), SIGTERM as `kill`
    does (to the command alone)."""
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)


def staged(folder) -> list[str]:
    """Staged run folders or temporary files left anywhere under ``folder``."""
    return [p.name for p in folder.rglob("*") if (".compactlab-" in p.name and p.name != ".compactlab-run")
            or p.name.endswith(".tmp")]


pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc and sends POSIX signals")


def signals(quick: int) -> list:
    """SIGINT (130) and SIGTERM (143): the README's suite sends the ``quick`` one, the tests taking
    turns; CI both (-m slow)."""
    return [(sig, status) if sig == quick else pytest.param(sig, status, marks=pytest.mark.slow)
            for sig, status in ((signal.SIGINT, 130), (signal.SIGTERM, 143))]


@pytest.mark.parametrize("sig, status", signals(signal.SIGINT))
def test_a_signal_to_a_read_ahead_replay_stops_both_processes_and_writes_nothing(tmp_path, api, big, sig, status):
    out = tmp_path / "new" / "out"
    proc = start(["replay", big, "--out", out, "-q"], tmp_path, api, COMPACTLAB_READ_AHEAD="1",
                 COMPACTLAB_PROBE_CACHE="0")  # (the reader still reading at the gate: as below)
    api.wait_held(1)
    (reader,) = children(proc.pid)
    assert state(reader) != "Z"  # the reader is still reading
    send(proc, sig)
    text = finish(proc, api)
    assert proc.returncode == status, text
    assert text == "error: interrupted\n"
    assert not (tmp_path / "new").exists() and staged(tmp_path) == []
    assert group_gone(proc.pid)  # the reader is gone too


def test_a_replay_started_with_sigint_ignored_ignores_it_reader_included(tmp_path, api, big):
    out = tmp_path / "out"
    # (the probe cache off: the reader looks for the probes and sends them, far more than its pipe
    # holds; with them cached it sent facts only, and on a loaded machine had now and then sent all
    # of them, and ended, before the replay reached its gate)
    proc = start(["replay", big, "--out", out, "-q", "--format", "json"], tmp_path, api, ignore_sigint=True,
                 COMPACTLAB_READ_AHEAD="1", COMPACTLAB_PROBE_CACHE="0")
    api.wait_held(1)
    (reader,) = children(proc.pid)
    assert state(reader) != "Z"  # still reading: the replay waits at the gate, the pipe is full
    os.killpg(proc.pid, signal.SIGINT)  # neither the replay nor its reader may die of it
    text = finish(proc, api)
    assert proc.returncode == 0, text
    assert (out / "summary.json").is_file() and text == ""


@pytest.mark.parametrize("sig, status", signals(signal.SIGTERM))
def test_a_signal_to_a_parallel_compare_keeps_the_finished_run_and_no_worker(tmp_path, api, sig, status):
    out = tmp_path / "cmp"
    t = SAMPLES / "synth-medium.jsonl"
    proc = start(["compare", t, "-p", "none", "-p", "s08", "--sweep", "summary.trigger=20000,30000",
                  "--jobs", "2", "--out", out, "-q"], tmp_path, api)
    # jobs in order: none (once: the sweep does not apply to it, 0 summaries), then s08 x 2 at the gate
    api.wait_held(2)  # both workers wait in an s08 run: the `none` run has been received
    assert len(children(proc.pid)) == 2
    send(proc, sig)
    text = finish(proc, api)
    assert proc.returncode == status, text
    assert text == f"error: interrupted: 1 of 3 runs finished; they are in {out}/\n"
    assert [r["policy"] for r in read_csv(out / "results.csv")] == ["none"]
    assert "Interrupted: 1 of 3 runs" in (out / "report.md").read_text()
    assert staged(tmp_path) == [] and group_gone(proc.pid)


def test_a_killed_worker_is_named_and_the_other_runs_are_kept(tmp_path, api):
    out = tmp_path / "cmp"
    t = SAMPLES / "synth-medium.jsonl"
    proc = start(["compare", t, "-p", "none", "-p", "s08", "--sweep", "summary.trigger=20000,30000",
                  "--jobs", "2", "--out", out, "-q"], tmp_path, api)
    api.wait_held(2)
    victim = min(children(proc.pid))  # the first worker forked; it holds one s08 run
    os.kill(victim, signal.SIGKILL)
    text = finish(proc, api)
    assert proc.returncode == 1, text
    lines = text.splitlines()
    assert len(lines) == 2 and lines[1] == f"error: 1 of 3 runs failed; the other 2 are in {out}/"
    assert lines[0].startswith(f"error: run {t} × s08 summary.trigger=") and lines[0].endswith(
        " failed: the worker process was killed (SIGKILL)")
    assert sorted(r["policy"] for r in read_csv(out / "results.csv")) == ["none", "s08"]
    assert "1 run(s) failed and are not here" in (out / "report.md").read_text()
    assert group_gone(proc.pid)


@pytest.mark.parametrize("sig, status", signals(signal.SIGINT))
def test_a_signal_to_a_compare_whose_workers_read_the_files_keeps_the_files_back_and_no_worker(tmp_path, api, sig,
                                                                                               status):
    """A corpus of files enough for each worker to read its own (``jobs/cluster.py``'s
    ``LocalWorkers``): six short sessions that never summarise come back, then both workers wait in
    a summary of the two long ones; the signal keeps the six files' runs."""
    import shutil

    from compactlab.synth import write

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(6):
        write(corpus / f"a{i}.jsonl", 2, seed=i)  # (2 calls of at most 3,000 tokens: no summary)
    for name in ("b6", "b7"):
        shutil.copy(SAMPLES / "synth-medium.jsonl", corpus / f"{name}.jsonl")
    out = tmp_path / "cmp"
    proc = start(["compare", corpus, "-p", "s08", "--sweep", "summary.trigger=20000", "--jobs", "2", "--out", out,
                  "-q"], tmp_path, api)
    api.wait_held(2)  # both workers in a long session's summary: each short one's runs are back
    assert len(children(proc.pid)) == 2
    send(proc, sig)
    text = finish(proc, api)
    assert proc.returncode == status, text
    assert text == f"error: interrupted: 12 of 16 runs finished; they are in {out}/\n"
    assert sorted({r["transcript"].rsplit("/", 1)[-1] for r in read_csv(out / "results.csv")}) == [
        f"a{i}.jsonl" for i in range(6)]
    assert staged(tmp_path) == [] and group_gone(proc.pid)


def test_pool_reports_a_dead_worker_by_job_and_runs_the_rest():
    from compactlab.corpus.pool import Failure, Pool

    def work(n: int) -> int:
        if n == 3:
            os.kill(os.getpid(), signal.SIGKILL)
        if n == 5:
            raise ValueError("five")
        return n * n

    with Pool(list(range(8)), work, 2) as pool:
        got = dict(pool.outcomes())
    assert sorted(got) == list(range(8))
    assert got[3] == Failure(3, "the worker process was killed (SIGKILL)")
    assert got[5] == Failure(5, "internal error: ValueError: five")
    assert {k: v for k, v in got.items() if k not in (3, 5)} == {n: n * n for n in (0, 1, 2, 4, 6, 7)}


class _RaisesItsSignal:
    """Dropped, it sends ``signum`` to this process from its ``__del__``: the handler runs there,
    inside the finalizer (as when a signal arrives while Python finalizes an object)."""

    def __init__(self, signum: int | None = None, error: Exception | None = None) -> None:
        self.signum, self.error = signum, error

    def __del__(self) -> None:
        if self.signum is not None:
            signal.raise_signal(self.signum)
        if self.error is not None:
            raise self.error


def test_an_interrupt_raised_in_a_finalizer_is_delivered_again_not_lost(monkeypatch):
    """Python prints an exception raised in ``__del__`` and goes on: an interrupt raised there (CI
    once saw a tune run on after Ctrl-C, "Exception ignored in _ConnectionBase.__del__") is
    delivered again to the code that runs next; other errors still reach the hook that was there.
    (SIGTERM, whose handler the test sets: pytest may have been started with SIGINT ignored.)"""
    from compactlab.plumbing import interrupts

    seen: list[BaseException] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_value))
    monkeypatch.setattr(interrupts, "_next_hook", interrupts._next_hook)
    previous = signal.signal(signal.SIGTERM, interrupts._terminated)
    try:
        _RaisesItsSignal(signal.SIGTERM)  # without the hook: raised in the finalizer, printed, lost
        for _ in range(100):
            pass
        assert [type(e) for e in seen] == [interrupts.Terminated]

        interrupts.install()
        started = time.monotonic()
        with pytest.raises(interrupts.Terminated):
            _RaisesItsSignal(signal.SIGTERM)
            for _ in range(2000):  # (bounded: 20 s; the signal sent again ends it within a step)
                time.sleep(0.01)
        assert time.monotonic() - started < 10
        assert len(seen) == 1  # (not printed: delivered)

        _RaisesItsSignal(error=ValueError("other"))
        assert [type(e) for e in seen] == [interrupts.Terminated, ValueError]
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_ctrl_c_in_check_reports_the_finished_checks_and_exits_130(cli, tmp_path, monkeypatch):
    import compactlab.corpus.compare as compare

    baseline = tmp_path / "baseline.json"
    files = [SAMPLES / "synth-small.jsonl", SAMPLES / "synth-medium.jsonl"]
    assert cli("check", *files, "-p", "s08", "--baseline", baseline, "--update-baseline").exit_code == 0
    real, seen = compare.GridContext.run, []

    def run(self, job):
        if seen:
            raise KeyboardInterrupt
        seen.append(job)
        return real(self, job)

    monkeypatch.setattr(compare.GridContext, "run", run)
    monkeypatch.setattr(compare, "usable_cores", lambda: 1)  # in this process, where the patch is
    r = cli("check", *files, "-p", "s08", "--baseline", baseline)
    assert r.exit_code == 130
    assert r.stderr == "error: interrupted: 1 of 2 runs finished (checked above); the check is incomplete\n"
    assert "synth-small.jsonl" in r.stdout and "synth-medium.jsonl" not in r.stdout
    before = baseline.read_bytes()
    seen.clear()
    r = cli("check", *files, "-p", "s08", "--baseline", baseline, "--update-baseline")
    assert r.exit_code == 130 and "not updated" in r.stderr and baseline.read_bytes() == before


def test_an_interrupt_right_after_the_output_folder_is_prepared_leaves_nothing(cli, tmp_path, monkeypatch):
    """The window the old code left open: --out prepared outside the try that rolls it back."""
    from compactlab.plumbing.outputs import OutputDir

    real = OutputDir.prepare

    def prepare_then_interrupt(self, *args, **kwargs):
        real(self, *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(OutputDir, "prepare", prepare_then_interrupt)
    for command in (["replay", SAMPLES / "synth-small.jsonl"], ["compare", SAMPLES / "synth-small.jsonl", "-p", "s08"]):
        r = cli(*command, "--out", tmp_path / "new" / "out")
        assert r.exit_code == 130 and r.stderr == "error: interrupted\n"
        assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("shared", [True, False])
def test_an_interrupted_replay_of_several_transcripts_keeps_and_reports_those_replayed(cli, tmp_path, monkeypatch,
                                                                                        shared):
    import compactlab.engine.loop as engine

    folder = tmp_path / "sessions"
    folder.mkdir()
    for name in ("a", "b", "c"):
        (folder / f"{name}.jsonl").write_bytes((SAMPLES / "synth-small.jsonl").read_bytes())
    real, seen = engine.replay, []

    def replay(*args, **kwargs):
        if len(seen) == 2:
            raise KeyboardInterrupt
        seen.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "replay", replay)
    monkeypatch.chdir(tmp_path)
    out = ["--out", tmp_path / "all"] if shared else []
    r = cli("replay", folder, *out, "--format", "json")
    assert r.exit_code == 130
    import orjson

    assert [run["summary"]["transcript"] for run in orjson.loads(r.stdout)["runs"]] == [
        str(folder / "a.jsonl"), str(folder / "b.jsonl")]
    if shared:
        assert r.stderr == f"error: interrupted: 2 of 3 transcripts replayed; their reports are in {tmp_path / 'all'}\n"
        assert sorted(p.name for p in (tmp_path / "all").iterdir()) == [".compactlab-run", "a-s08", "b-s08"]
    else:
        assert r.stderr == ("error: interrupted: 2 of 3 transcripts replayed; their reports are in "
                            "reports/a-s08, reports/b-s08\n")
        assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == ["a-s08", "b-s08"]
    assert not [p for p in tmp_path.rglob("*") if ".compactlab-" in p.name and p.name != ".compactlab-run"]


@pytest.mark.parametrize("sig, status", signals(signal.SIGTERM))
def test_a_signal_to_a_tune_stops_its_share_workers_and_says_how_to_go_on(tmp_path, api, big, sig, status):
    """tune's workers keep their share of the corpus across trials (#32 §1): a signal while they
    replay ends the tune (exit 130 / 143, no traceback) and leaves no worker behind."""
    out = tmp_path / "tune"
    proc = subprocess.Popen([sys.executable, "-m", "compactlab", "tune", str(big), str(SAMPLES / "synth-medium.jsonl"),
                             "-p", "s08", "--space", "micro.keep_recent=1:9", "--trials", "200", "--jobs", "2",
                             "--out", str(out), "-q", "--no-chart"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    while len(children(proc.pid)) < 2:  # both share workers are up: the corpus is being replayed
        assert proc.poll() is None, proc.communicate()[1].decode()
        time.sleep(0.01)
    send(proc, sig)
    text = finish(proc, api)
    assert proc.returncode == status, text
    assert "interrupted before the first trial finished" in text or "continue with --resume" in text, text
    assert staged(tmp_path) == [] and group_gone(proc.pid)


def test_an_interrupt_sent_again_goes_to_the_thread_that_raised_it(monkeypatch):
    """Sent to the process (``os.kill``), the signal may land on another thread, and a main thread
    asleep in a wait would sleep on (the test above stalled 60 s in one run of three under xdist):
    it is sent to the raising thread itself."""
    import threading
    import types

    from compactlab.plumbing import interrupts

    sent: list[tuple[int, int]] = []
    done = threading.Event()
    monkeypatch.setattr(interrupts.signal, "pthread_kill", lambda t, s: (sent.append((t, s)), done.set()))
    monkeypatch.setattr(interrupts.os if hasattr(interrupts, "os") else os, "kill",
                        lambda *a: pytest.fail("sent to the process, not to the thread"))
    interrupts.redeliver(types.SimpleNamespace(exc_value=interrupts.Terminated()))
    assert done.wait(10)
    assert sent == [(threading.get_ident(), signal.SIGTERM)]


def test_an_interrupt_python_wrapped_in_another_error_still_ends_130(cli, monkeypatch):
    """An interrupt raised while a class is made comes out as "RuntimeError: Error calling
    __set_name__ ..." (Python 3.11): it is an interrupt, not an internal error."""
    import compactlab.jobs.replay as job
    from compactlab.plumbing.interrupts import Terminated, interrupt_in

    def wrapped(*a, **k):
        try:
            raise Terminated()
        except KeyboardInterrupt as stop:
            raise RuntimeError("Error calling __set_name__ on 'Field' instance 'trigger'") from stop

    monkeypatch.setattr(job, "replay_prepared", wrapped)
    r = cli("replay", SAMPLES / "synth-small.jsonl", "--dry-run")
    assert r.exit_code == 143 and r.stderr == "error: interrupted\n"
    assert interrupt_in(ValueError("plain")) is None

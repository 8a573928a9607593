"""A user's files and keys are safe (#48): no output lands on an input or outside --out, no
complete report is replaced by a part of a rerun, two runs never share an --out, and no piece of
an API key reaches an output, a log or a task sent to a worker."""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from helpers import ROOT, SAMPLES, files_under

SMALL = SAMPLES / "synth-small.jsonl"
MEDIUM = SAMPLES / "synth-medium.jsonl"


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def pieces(key: str) -> set[str]:
    """Every 8-character piece of ``key``: none may appear anywhere."""
    return {key[i:i + 8] for i in range(len(key) - 7)}


def leaked(text: str, key: str) -> list[str]:
    return sorted(p for p in pieces(key) if p in text)


def everything_under(folder: Path) -> str:
    return "".join(p.read_bytes().decode("utf-8", "replace") for p in folder.rglob("*") if p.is_file())


# -- an output that is an input ------------------------------------------------------------------

def _same_file(tmp_path: Path, original: Path, how: str) -> Path:
    """A name for ``original`` made ``how``: a symbolic link, the same path, a path through ``..``,
    a hard link."""
    if how == "same path":
        return original
    if how == "through ..":
        (tmp_path / "sub").mkdir(exist_ok=True)
        return tmp_path / "sub" / ".." / original.name
    link = tmp_path / f"{how.replace(' ', '-')}-{original.name}"
    if os.path.lexists(link):
        return link
    if how == "symlink":
        link.symlink_to(original)
    else:
        os.link(original, link)
    return link


HOWS = ["symlink", "same path", "through ..", "hard link"]


@pytest.mark.parametrize("how", HOWS)
def test_convert_never_writes_over_its_input(cli, tmp_path, how):
    source = tmp_path / "in.jsonl"
    shutil.copy(MEDIUM, source)
    before = md5(source)
    r = cli("convert", source, "-o", _same_file(tmp_path, source, how))
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith("error: --output ") and "is the same file as the input" in r.stderr
    assert md5(source) == before and "Traceback" not in r.stderr
    r = cli("convert", source, "-o", _same_file(tmp_path, source, how) if how != "hard link" else source, "--force")
    assert r.exit_code == 2 and md5(source) == before  # (--force replaces another file, never the input)


def test_synth_and_convert_replace_no_existing_file_without_force(cli, tmp_path):
    """synth has no input, and its --output through a link to an existing transcript replaced it."""
    transcript = tmp_path / "mine.jsonl"
    shutil.copy(SMALL, transcript)
    link = tmp_path / "link.jsonl"
    link.symlink_to(transcript)
    before = md5(transcript)
    for args in (["synth", "-o", link, "--calls", "10"], ["synth", "-o", transcript, "--calls", "10"],
                 ["convert", MEDIUM, "-o", link]):
        r = cli(*args)
        assert r.exit_code == 2, r.output
        assert "exists: refusing to replace it" in r.stderr and "--force" in r.stderr
        assert md5(transcript) == before
    assert cli("synth", "-o", tmp_path / "new.jsonl", "--calls", "10").exit_code == 0
    assert cli("synth", "-o", tmp_path / "new.jsonl", "--calls", "12", "--force").exit_code == 0


@pytest.fixture
def baseline(cli, tmp_path):
    files = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    for f, src in zip(files, (SMALL, MEDIUM)):
        shutil.copy(src, f)
    path = tmp_path / "baseline.json"
    r = cli("check", *files, "-p", "s08", "--baseline", path, "--update-baseline")
    assert r.exit_code == 0, r.stderr
    return files, path


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("victim", ["transcript", "baseline"])
def test_check_never_writes_its_junit_report_over_an_input(cli, tmp_path, baseline, how, victim, monkeypatch):
    import compactlab.jobs.check as check

    files, path = baseline
    target = files[0] if victim == "transcript" else path
    before = {f: md5(f) for f in (*files, path)}
    monkeypatch.setattr(check, "run_corpus", lambda *a, **k: pytest.fail("the work began"))
    r = cli("check", *files, "-p", "s08", "--baseline", path, "--junit", _same_file(tmp_path, target, how))
    assert r.exit_code == 2, r.output
    assert "--junit" in r.stderr and "is the same file as the input" in r.stderr
    assert {f: md5(f) for f in before} == before


@pytest.mark.parametrize("how", ["symlink", "same path", "hard link"])
def test_a_baseline_update_and_the_step_summary_never_land_on_a_transcript(cli, tmp_path, baseline, how, monkeypatch):
    files, path = baseline
    before = md5(files[0])
    r = cli("check", *files, "-p", "s08", "--baseline", _same_file(tmp_path, files[0], how), "--update-baseline")
    assert r.exit_code == 2 and "is the same file as the input" in r.stderr and md5(files[0]) == before
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(_same_file(tmp_path, files[1], how if how != "symlink" else "same path")))
    before = md5(files[1])
    r = cli("check", *files, "-p", "s08", "--baseline", path)
    assert r.exit_code == 2 and "GITHUB_STEP_SUMMARY" in r.stderr and md5(files[1]) == before


def test_a_policy_file_is_an_input_too(cli, tmp_path):
    policy = tmp_path / "mine.toml"
    policy.write_text('extends = "s08"\nname = "mine"\n')
    r = cli("check", SMALL, "-p", policy, "--baseline", tmp_path / "b.json", "--update-baseline",
            "--junit", policy)
    assert r.exit_code == 2 and "is the same file as the input" in r.stderr
    assert policy.read_text() == 'extends = "s08"\nname = "mine"\n'


@pytest.mark.parametrize("command", ["replay", "compare"])
def test_an_output_folder_that_holds_an_input_is_refused(cli, tmp_path, command):
    runs = tmp_path / "runs"
    runs.mkdir()
    source = runs / "session.jsonl"
    shutil.copy(SMALL, source)
    before = md5(source)
    for force in ([], ["--force"]):
        r = cli(command, source, "-p", "s08", "--out", runs, *force)
        assert r.exit_code == 2, r.output
        assert "holds the input" in r.stderr and md5(source) == before
    r = cli(command, source, "-p", "s08", "--out", tmp_path)  # (a folder above it holds it too)
    assert r.exit_code == 2 and "holds the input" in r.stderr and md5(source) == before


def test_an_earlier_run_folder_that_holds_an_input_is_not_replaced(cli, tmp_path):
    """A run's own folder (ours, so replaced whole by a rerun) holding the file a rerun reads:
    the rerun would remove its own input."""
    out = tmp_path / "o"
    assert cli("replay", MEDIUM, "--out", out, "--write-transcripts", "-p", "s08").exit_code == 0
    inner = next(out.rglob("transcript-*.jsonl"))
    before = md5(inner)
    r = cli("replay", inner, "--out", out, "-p", "s08")
    assert r.exit_code == 2 and "holds the input" in r.stderr and md5(inner) == before


# -- a rerun never replaces a complete report with a part of one ----------------------------------

def _interrupt_after(monkeypatch, n: int) -> None:
    import compactlab.corpus.compare as compare

    real, seen = compare.GridContext.run, []

    def run(self, job):
        if len(seen) >= n:
            raise KeyboardInterrupt
        seen.append(job)
        return real(self, job)

    monkeypatch.setattr(compare.GridContext, "run", run)


def test_an_interrupted_compare_rerun_keeps_the_earlier_complete_report(cli, tmp_path, monkeypatch):
    out = tmp_path / "cmp"
    args = ["compare", SMALL, MEDIUM, "-p", "none", "-p", "s08", "--jobs", "1", "--charts", "none", "--out", out]
    assert cli(*args).exit_code == 0
    before = {name: hashlib.md5(data).hexdigest() for name, data in files_under(out).items()}
    assert len(before) >= 4
    _interrupt_after(monkeypatch, 1)
    r = cli(*args)
    assert r.exit_code == 130, r.output
    assert "the earlier complete run" in r.stderr and "is kept" in r.stderr
    assert {name: hashlib.md5(data).hexdigest() for name, data in files_under(out).items()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cmp"]  # nothing staged is left beside it


def test_an_interrupted_first_compare_keeps_its_part_and_a_complete_rerun_replaces_it(cli, tmp_path, monkeypatch):
    out = tmp_path / "cmp"
    args = ["compare", SMALL, MEDIUM, "-p", "none", "-p", "s08", "--jobs", "1", "--charts", "none", "--out", out]
    with monkeypatch.context() as m:
        _interrupt_after(m, 1)
        r = cli(*args)
    assert r.exit_code == 130 and (out / "results.csv").read_text().count("\n") == 2  # the head and one run
    assert orjson.loads((out / ".compactlab-run").read_bytes())["complete"] is False
    assert cli(*args).exit_code == 0
    assert (out / "results.csv").read_text().count("\n") == 5
    assert orjson.loads((out / ".compactlab-run").read_bytes())["complete"] is True


def test_an_interrupt_while_drawing_keeps_the_earlier_complete_report(cli, tmp_path, monkeypatch):
    import compactlab.reports.compare_report as report

    out = tmp_path / "cmp"
    args = ["compare", SMALL, "-p", "none", "-p", "s08", "--jobs", "1", "--charts", "summary", "--out", out]
    assert cli(*args).exit_code == 0
    before = files_under(out)
    monkeypatch.setattr(report, "report_files", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
    r = cli(*args)
    assert r.exit_code == 130 and "interrupted while drawing: the earlier complete run" in r.stderr
    assert files_under(out) == before


def test_two_runs_on_one_out_at_once_the_second_is_refused(tmp_path):
    from compactlab.errors import UsageError
    from compactlab.plumbing.outputs import OutputDir

    first = OutputDir(tmp_path / "o")
    first.prepare()
    first.write_bytes("a.txt", b"first")
    with pytest.raises(UsageError, match=r"--out .*o: another compactlab run is writing it \(process \d+\)"):
        OutputDir(tmp_path / "o").prepare()
    first.commit()
    second = OutputDir(tmp_path / "o")  # free again once the first is in place
    second.prepare()
    second.write_bytes("b.txt", b"second")
    second.commit()
    assert files_under(tmp_path / "o").keys() == {".compactlab-run", "b.txt"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o"]  # the lock's file is gone with the run


def test_a_compare_while_another_process_holds_the_out_is_refused(tmp_path):
    """Another process (another compactlab) holds the lock: the command says so and writes nothing."""
    out = tmp_path / "cmp"
    lock = tmp_path / ".cmp.compactlab-lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys\n"
         f"fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT)\nfcntl.flock(fd, fcntl.LOCK_EX)\n"
         "os.write(fd, b'%d' % os.getpid())\nprint('locked', flush=True)\nsys.stdin.read()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        r = subprocess.run([sys.executable, "-m", "compactlab", "compare", str(SMALL), "-p", "s08", "--out", str(out),
                            "-q"], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
                           timeout=120)
    finally:
        holder.stdin.close()
        holder.wait(30)
    assert r.returncode == 2, r.stderr
    assert f"another compactlab run is writing it (process {holder.pid})" in r.stderr
    assert not out.exists()


def test_what_a_killed_run_left_is_removed_by_the_next(tmp_path):
    """SIGKILL leaves the staged folder (and a replaced run) beside --out: the next run removes them."""
    from compactlab.plumbing.outputs import OutputDir

    killed = OutputDir(tmp_path / "o")
    killed.prepare()
    killed.write_bytes("half.txt", b"x")
    os.close(killed._lock.fd)  # the process is gone: its lock with it, its folder left
    (tmp_path / f".o.compactlab-{os.getpid()}-0123abcd-old").mkdir()
    mine = tmp_path / ".o.compactlab-notes"  # (not a run's name: kept)
    mine.mkdir()
    assert len(list(tmp_path.iterdir())) == 4
    out = OutputDir(tmp_path / "o")
    out.prepare()
    out.write_bytes("whole.txt", b"y")
    out.commit()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".o.compactlab-notes", "o"]


# -- tune writes only inside --out ----------------------------------------------------------------

def _tune(cli, out, *extra):
    return cli("tune", SMALL, "-p", "s08", "--space", "micro.keep_recent=1:5", "--trials", "3", "--jobs", "1",
               "--max-violations", "1000",
               "--out", out, "-q", *extra)


@pytest.mark.parametrize("planted", ["front.json", "front.csv", "policies", "charts"])
@pytest.mark.parametrize("how", [[], ["--force"], ["--resume"]])
def test_tune_never_writes_through_a_link_planted_in_out(cli, tmp_path, planted, how):
    out = tmp_path / "t"
    if how == ["--resume"]:
        assert _tune(cli, out).exit_code == 0
        if (out / planted).is_dir():
            shutil.rmtree(out / planted)
        elif (out / planted).exists():
            (out / planted).unlink()
    else:
        out.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    victim = elsewhere / "precious.txt"
    victim.write_text("keep me")
    (out / planted).symlink_to(elsewhere if planted in ("policies", "charts") else victim)
    r = _tune(cli, out, *how)
    assert r.exit_code == 2, r.output
    assert f"{planted} is a symbolic link: refusing to write through it" in r.stderr
    assert victim.read_text() == "keep me" and sorted(p.name for p in elsewhere.iterdir()) == ["precious.txt"]


def test_a_link_planted_where_a_front_file_goes_is_replaced_not_followed(tmp_path):
    from compactlab.plumbing.outputs import write_in_folder

    (tmp_path / "out" / "charts").mkdir(parents=True)
    victim = tmp_path / "precious.svg"
    victim.write_bytes(b"keep")
    (tmp_path / "out" / "charts" / "tune.svg").symlink_to(victim)
    write_in_folder(tmp_path / "out", "charts/tune.svg", b"png")
    assert victim.read_bytes() == b"keep" and not (tmp_path / "out" / "charts" / "tune.svg").is_symlink()
    assert (tmp_path / "out" / "charts" / "tune.svg").read_bytes() == b"png"


def test_a_forged_trial_outside_the_space_never_becomes_a_front_policy(cli, tmp_path):
    import optuna

    from compactlab.corpus.study import STUDY, storage_of, study_path

    out = tmp_path / "t"
    assert _tune(cli, out).exit_code == 0
    study = optuna.load_study(storage=storage_of(study_path(str(out))), study_name=STUDY)
    real = study.trials[0]
    forged = optuna.trial.create_trial(
        params={"micro.keep_recent": 500}, distributions={"micro.keep_recent": optuna.distributions.IntDistribution(1, 1000)},
        values=[1.0, 1.0], user_attrs={**real.user_attrs, "cost_saving": 1.0, "recall": 1.0},
        system_attrs={"constraints": [-1.0, 0.0]})
    study.add_trial(forged)
    r = _tune(cli, out, "--resume", "--trials", "4")
    assert r.exit_code == 0, r.stderr
    assert "500 for micro.keep_recent is outside the searched space" in r.stderr
    front = orjson.loads((out / "front.json").read_bytes())["front"]
    assert front and all(1 <= p["micro.keep_recent"] <= 5 for p in front)
    assert all("500" not in p.read_text() for p in (out / "policies").glob("*.toml"))


# -- the key -------------------------------------------------------------------------------------

KEY = "sk-ant-api03-" + "Hq7vNw2XbL" * 5 + "-keepOUT"


def test_the_live_options_sent_to_a_worker_hold_no_key_and_the_worker_reads_its_own(monkeypatch):
    from compactlab.errors import UsageError
    from compactlab.summarizers import LiveOptions

    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    options = LiveOptions.from_env(None, None, True, None)
    payload = pickle.dumps(options)
    assert not leaked(payload.decode("latin-1"), KEY) and KEY not in repr(options)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "the-workers-own-key")
    assert pickle.loads(payload).key() == "the-workers-own-key"
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(UsageError, match="ANTHROPIC_API_KEY is not set in this process"):
        pickle.loads(payload).key()


class _PicklingClient:
    """A Dask client that runs each task here, after pickling it as Dask sends it to a worker; what
    every task carried is kept."""

    sent: list[bytes] = []

    def __init__(self, address, timeout=None):
        pass

    def run(self, fn, *args):
        return {"w": fn(*args)}

    def nthreads(self):
        return {"w": 1}

    def scatter(self, data, broadcast=False):
        self.sent.append(pickle.dumps(data))
        return data

    def submit(self, fn, *args, pure=True):
        import cloudpickle
        from distributed import Future  # noqa: F401  (the real one exists: the extra is installed)

        self.sent.append(cloudpickle.dumps((fn, args)))
        fn, args = pickle.loads(self.sent[-1])
        return _Done(fn(*args))

    def cancel(self, futures):
        pass

    def close(self):
        pass


class _Done:
    def __init__(self, value):
        self.value = value

    def result(self):
        return self.value


def test_a_dask_task_carries_no_piece_of_the_key(cli, tmp_path, monkeypatch):
    pytest.importorskip("distributed", reason="dask is an optional extra")
    import distributed

    from fake_anthropic import FakeAPI

    api = FakeAPI()
    api.echo = KEY  # (the server echoes it too: nothing of it may come back into a result)
    url, server = api.serve()
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    monkeypatch.setattr(distributed, "Client", _PicklingClient)
    monkeypatch.setattr(distributed, "as_completed", lambda futures: list(futures))
    _PicklingClient.sent = []
    try:
        r = cli("compare", SMALL, MEDIUM, "-p", "s08", "--summarizer", "anthropic", "--executor", "dask://127.0.0.1:1",
                "--out", tmp_path / "out", "--cache-dir", tmp_path / "cache", "--charts", "none")
    finally:
        server.shutdown()
    assert r.exit_code == 0, r.stderr
    assert len(_PicklingClient.sent) >= 2 and api.message_requests  # every task sent (a file each), the summarizer asked
    for what in (*[s.decode("latin-1") for s in _PicklingClient.sent], r.stdout, r.stderr, everything_under(tmp_path)):
        assert not leaked(what, KEY)


def test_the_sdk_debug_log_shows_no_piece_of_the_key(tmp_path):
    """ANTHROPIC_LOG=debug: the SDK logs every response's headers, and this server echoes the key in
    one of them."""
    script = f"""
import os, sys
sys.path.insert(0, {str(ROOT / 'tests')!r})
from fake_anthropic import FakeAPI
api = FakeAPI()
api.echo = os.environ["ANTHROPIC_API_KEY"]
url, server = api.serve()
os.environ["ANTHROPIC_BASE_URL"] = url
from compactlab.__main__ import main
sys.argv = ["compactlab", "replay", {str(MEDIUM)!r}, "--summarizer", "anthropic", "--no-cache", "--out",
            {str(tmp_path / 'out')!r}, "-p", "s08"]
main()
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ANTHROPIC_API_KEY": KEY, "ANTHROPIC_LOG": "debug",
           "COMPACTLAB_CACHE_DIR": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "HTTP Response" in r.stderr and "x-echo" in r.stderr  # (the SDK's log is on, the header in it)
    for what in (r.stdout, r.stderr, everything_under(tmp_path)):
        assert not leaked(what, KEY)


def test_a_model_answer_that_echoes_the_key_is_written_nowhere(cli, tmp_path, monkeypatch):
    from compactlab import load_transcript
    from fake_models import FakeModels

    api = FakeModels([load_transcript(str(MEDIUM))])
    api.echo = KEY
    url, server = api.serve()
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    monkeypatch.setenv("COMPACTLAB_CACHE_DIR", str(tmp_path / "cache"))
    try:
        args = ["next-action", MEDIUM, "-p", "s08", "--samples", "4", "--out", tmp_path / "out"]
        r = cli(*args, "--format", "json")
        again = cli(*args, "--format", "table")  # (answered from the cache)
    finally:
        server.shutdown()
    assert r.exit_code in (0, 1) and again.exit_code in (0, 1), r.stderr
    assert len(api.asked) >= 2 and "[key]" in (tmp_path / "out" / "samples.csv").read_text()
    for name in ("report.md", "samples.csv", "next_action.json"):
        assert (tmp_path / "out" / name).is_file()
    for what in (r.stdout, r.stderr, again.stdout, again.stderr, everything_under(tmp_path)):
        assert not leaked(what, KEY)


# -- caches ---------------------------------------------------------------------------------------

def _recall(cli, cache: Path) -> tuple[float, str]:
    r = cli("replay", MEDIUM, "-p", "s08", "--format", "json", "--out", cache.parent / f"out-{cache.name}", "--force",
            env={"COMPACTLAB_CACHE_DIR": str(cache)})
    assert r.exit_code == 0, r.stderr
    return orjson.loads(r.stdout)["runs"][0]["summary"]["recall"], r.stderr


@pytest.mark.parametrize("unsafe", ["world-writable", "another user's"])
def test_a_cache_folder_others_can_write_is_neither_read_nor_written(cli, tmp_path, unsafe):
    if unsafe == "another user's" and os.geteuid() != 0:
        pytest.skip("giving a folder to another user needs root")
    clean, _ = _recall(cli, tmp_path / "clean")
    shared = tmp_path / "shared"
    shutil.copytree(tmp_path / "clean", shared)
    planted = 0
    from compactlab.engine.measures.probe_cache import COLUMNS

    for entry in (shared / "probes").glob("*.json"):  # another user's probes: half of them gone
        doc = orjson.loads(entry.read_bytes())
        doc.update({k: v[: len(v) // 2] for k, v in doc.items() if k in COLUMNS})
        entry.write_bytes(orjson.dumps(doc))
        planted += 1
    assert planted
    assert _recall(cli, shared)[0] != clean  # (the planted entries are read where the folder is trusted)
    if unsafe == "world-writable":
        shared.chmod(0o777)
    else:
        os.chown(shared, 12345, 12345)
    recall, said = _recall(cli, shared)
    assert recall == clean
    assert said.count("the cache there is neither read nor written") == 1 and str(shared) in said


def test_probes_are_stored_only_for_the_bytes_that_were_hashed(tmp_path):
    from compactlab.engine.measures import probe_cache
    from compactlab.engine.measures.probes import Probe

    path = tmp_path / "big.jsonl"
    unique = orjson.dumps({"role": "user", "content": f"{tmp_path}"}) + b"\n"  # (bytes no other test cached)
    path.write_bytes(MEDIUM.read_bytes() * (1 + probe_cache.MIN_BYTES // MEDIUM.stat().st_size) + unique)
    key = probe_cache.key_of(str(path))
    assert key is not None
    found = {3: [Probe("parse_config", ((0, 0),), 1, "bash", "path")]}
    data = bytearray(path.read_bytes())
    data[100:104] = b"XXXX"  # an edit of the same size while it was being read
    path.write_bytes(bytes(data))
    os.utime(path, ns=(1, 1))  # (whatever the file system's clock: its times changed)
    probe_cache.save(key, found)
    assert not probe_cache.present(key)
    key = probe_cache.key_of(str(path))
    probe_cache.save(key, found)
    assert probe_cache.present(key) and probe_cache.load(key, []) == found


# -- what was left from before ---------------------------------------------------------------------

def test_a_junit_report_that_cannot_be_written_leaves_no_folder(cli, tmp_path, baseline, monkeypatch):
    import errno

    from compactlab.plumbing import outputs

    files, path = baseline

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(outputs, "mkstemp", full)
    r = cli("check", *files, "-p", "s08", "--baseline", path, "--junit", tmp_path / "new" / "deeper" / "check.xml")
    assert r.exit_code == 1 and "no space left on the device" in r.stderr  # (#56 §5: a failed run, exit 1)
    assert not (tmp_path / "new").exists()


def test_a_baseline_changed_by_hand_is_said(cli, tmp_path, baseline):
    files, path = baseline
    doc = orjson.loads(path.read_bytes())
    assert "digest" in doc
    doc["records"][0]["metrics"]["cost_usd"] *= 10  # a looser limit slipped in
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    r = cli("check", *files, "-p", "s08", "--baseline", path, "-q")
    assert "its records were changed since compactlab wrote them" in r.stderr
    clean = cli("check", *files, "-p", "s08", "--baseline", path, "--update-baseline")
    assert clean.exit_code == 0
    r = cli("check", *files, "-p", "s08", "--baseline", path)
    assert r.exit_code == 0 and "changed since" not in r.stderr


@pytest.mark.parametrize("kind", ["fifo", "socket"])
def test_a_special_junit_destination_is_refused_before_any_work(cli, tmp_path, baseline, kind, monkeypatch):
    import socket

    import compactlab.jobs.check as check

    files, path = baseline
    special = tmp_path / "special"
    if kind == "fifo":
        os.mkfifo(special)
    else:
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(special))
    monkeypatch.setattr(check, "run_corpus", lambda *a, **k: pytest.fail("the work began"))
    r = cli("check", *files, "-p", "s08", "--baseline", path, "--junit", special)
    assert r.exit_code == 2
    assert ("a named pipe" if kind == "fifo" else "a socket") in r.stderr and "refusing" in r.stderr


def test_an_out_that_is_a_dangling_link_is_refused_in_one_line(cli, tmp_path):
    """(#49) A rename into a dangling link's target failed as an internal error."""
    link = tmp_path / "o"
    link.symlink_to(tmp_path / "nowhere" / "deeper")
    for args in (["replay", SMALL], ["compare", SMALL, "-p", "s08"]):
        r = cli(*args, "--out", link)
        assert r.exit_code == 2 and f"--out {link}: a symbolic link to nothing" in r.stderr, r.output
    assert link.is_symlink() and not (tmp_path / "nowhere").exists()

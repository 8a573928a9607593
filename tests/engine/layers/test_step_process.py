"""Your own step in another process (#45 §2): protocol compactlab-step version 1 over JSON lines;
the reference process in examples/, and processes that are slow, crash or lie: each refused with a
clear error naming it, none hangs, nothing is half-written."""

from __future__ import annotations

import json
import shlex
import sys

import pytest

from helpers import ROOT, SAMPLES

MEDIUM = SAMPLES / "synth-medium.jsonl"
SMALL = SAMPLES / "synth-small.jsonl"
REFERENCE = ROOT / "examples" / "step_process.py"
PY = shlex.quote(sys.executable)

#: a process that speaks the protocol up to ``{body}``, which answers each call
TEMPLATE = """import json, sys
hello = json.loads(sys.stdin.readline())
print(json.dumps({hello_answer}), flush=True)
for line in sys.stdin:
    request = json.loads(line)
{body}
"""


def _process(tmp_path, body: str, hello_answer: str = '{"version": 1}') -> str:
    script = tmp_path / "step.py"
    script.write_text(TEMPLATE.format(hello_answer=hello_answer, body=body))
    return f"cmd:{PY} {shlex.quote(str(script))}"


def _summary(cli, tmp_path, *args) -> dict:
    r = cli("replay", *args, "--format", "json", "--dry-run")
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)["runs"][0]["summary"]


def test_the_reference_process_replays_and_sending_only_what_changed_changes_nothing(cli, tmp_path):
    ref = f"cmd:{PY} {shlex.quote(str(REFERENCE))}"
    stateful = _summary(cli, tmp_path, MEDIUM, "-p", ref)
    assert stateful["policy"] == "step_process" and stateful["custom"] > 0 and stateful["reduction"] > 0.5
    stateless = tmp_path / "stateless.py"  # the same step, sent the whole context every call
    stateless.write_text(REFERENCE.read_text().replace('"keeps_state": True', '"keeps_state": False'))
    whole = _summary(cli, tmp_path, MEDIUM, "-p", f"cmd:{PY} {shlex.quote(str(stateless))}")
    for key in ("tokens_total", "cost_usd", "custom", "recall", "violations_introduced"):
        assert whole[key] == stateful[key], key


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_process_step_runs_in_compare_workers_and_takes_its_settings(cli, tmp_path, jobs):
    """Two policies that give one command other settings each run with their own, in one process
    as on workers where one runs both (the process is told its settings once: each has its own)."""
    policy = tmp_path / "proc.toml"
    policy.write_text(f'extends = "none"\nname = "proc"\norder = ["custom"]\n[custom]\nenabled = true\n'
                      f'call = {json.dumps(f"cmd:{sys.executable} {REFERENCE}")}\n[custom.settings]\nkeep = 30\n')
    out = tmp_path / "cmp"
    r = cli("compare", MEDIUM, SMALL, SAMPLES / "huge-batch.jsonl", "-p", policy, "-p",
            f"cmd:{PY} {shlex.quote(str(REFERENCE))}", "--jobs", jobs, "--out", out, "-q", "--charts", "none")
    assert r.exit_code == 0, r.stderr
    runs = {(row["transcript"].rsplit("/", 1)[-1], row["policy"]): row
            for row in json.loads((out / "results.json").read_text())["runs"]}
    medium = "synth-medium.jsonl"
    assert runs[(medium, "proc")]["tokens_total"] > runs[(medium, "step_process")]["tokens_total"]  # keep 30 > 12


@pytest.mark.parametrize("body,hello,said", [
    ("    pass  # never answers", '{"version": 1}', "did not answer within 0.5 s"),
    ("    sys.stderr.write('boom: the step broke\\n'); sys.exit(3)", '{"version": 1}',
     "ended (exit status 3); it said: boom: the step broke"),
    ("    print('{\"messages\": [999]}', flush=True)", '{"version": 1}', "kept message 999, but was sent"),
    ("    print('not json', flush=True)", '{"version": 1}', "answered 'not json', which is not JSON"),
    ("    print('{\"keep\": []}', flush=True)", '{"version": 1}', 'not {"messages": [...]}'),
    ("    pass", '{"version": 2}', "not compactlab-step version 1"),
])
def test_a_process_that_is_slow_crashes_or_lies_is_refused_by_name(cli, tmp_path, body, hello, said):
    ref = _process(tmp_path, body, hello)
    # (only the process that never answers is given a short time: the others answer, however busy the machine)
    timeout = "0.5" if "never answers" in body else "60"
    r = cli("replay", SMALL, "-p", ref, "--set", f"custom.timeout={timeout}", "-o", tmp_path / "out")
    assert r.exit_code == 2, r.stderr
    assert said in r.stderr and "custom step cmd:" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_a_command_that_cannot_start_is_said(cli, tmp_path):
    r = cli("replay", SMALL, "-p", "cmd:no-such-program-here --flag", "-o", tmp_path / "out")
    assert r.exit_code == 2 and "cannot start 'no-such-program-here'" in r.stderr, r.stderr


def test_a_changed_script_is_a_changed_policy_to_check(cli, tmp_path):
    from compactlab import load_policy
    from compactlab.engine.layers.custom import load_step

    ref = _process(tmp_path, "    print(json.dumps({'messages': list(range(len(request['messages'])))}), flush=True)")
    before = load_policy(ref).fingerprint
    baseline = tmp_path / "baseline.json"
    assert cli("check", SMALL, "-p", ref, "--baseline", baseline, "--update-baseline", "-q").exit_code == 0
    assert cli("check", SMALL, "-p", ref, "--baseline", baseline, "-q").exit_code == 0
    script = tmp_path / "step.py"
    script.write_text(script.read_text() + "# changed\n")
    load_step.cache_clear()
    try:
        assert load_policy(ref).fingerprint != before
        r = cli("check", SMALL, "-p", ref, "--baseline", baseline, "--format", "json")
        assert json.loads(r.stdout)["results"][0]["fingerprint_changed"] is True
    finally:
        load_step.cache_clear()


def test_ctrl_c_while_the_process_works_stops_both_cleanly(tmp_path):
    """SIGINT while the step's process holds a call: compactlab exits 130 with one line, and the
    process has ended by then (its input closed; nothing left running). The test waits on what the
    process says (a line in a FIFO), never on time."""
    import os
    import signal
    import subprocess

    said = tmp_path / "said"
    os.mkfifo(said)
    ref = _process(tmp_path, f"    open({str(said)!r}, 'w').write(str(__import__('os').getpid()) + '\\n')\n"
                             "    sys.stdin.read()  # holds the call until its input closes")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "compactlab", "replay", str(SMALL), "-p", ref, "--dry-run", "-q"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    with open(said) as fifo:  # (blocks until the process has the call)
        step_pid = int(fifo.readline())
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert b"Traceback" not in err and err.decode().count("\n") <= 2, err
    with pytest.raises(ProcessLookupError):
        os.kill(step_pid, 0)  # (ended and reaped before compactlab exited)


def test_your_own_steps_run_on_a_dask_cluster_as_locally(cli, tmp_path):
    """(#45 §5) A Python step and a step in another process on a Dask cluster give the local
    numbers: the worker loads the one by its name and starts the other itself (each worker thread
    its own process: two conversations never share one)."""
    distributed = pytest.importorskip("distributed", reason="dask is an optional extra")
    args = [MEDIUM, SMALL, SAMPLES / "huge-batch.jsonl", "-p", "py:custom_steps:keep_ends", "-p",
            f"cmd:{PY} {shlex.quote(str(REFERENCE))}", "--dry-run", "--format", "json"]
    local = json.loads(cli("compare", *args, "--jobs", "1").stdout)["runs"]
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0") as cluster:
        r = cli("compare", *args, "--executor", f"dask://{cluster.scheduler_address}")
    assert r.exit_code == 0, r.stderr
    remote = json.loads(r.stdout)["runs"]
    assert len(remote) == 9 and remote == local and {row["policy"] for row in remote} == {"keep_ends", "step_process",
                                                                                          "none"}


def test_tune_searches_a_process_steps_settings_that_its_policy_gives(cli, tmp_path):
    """A process declares no settings' types: tune searches a key the policy gives a value (from
    which its type is read), and says so of one it does not give."""
    ref = f"cmd:{PY} {shlex.quote(str(REFERENCE))}"
    args = ("tune", SMALL, "-p", ref, "--space", "custom.settings.keep=2:10", "--trials", "2", "-q")
    bad = cli(*args, "--out", tmp_path / "bad")
    assert bad.exit_code == 2 and "declares no settings" in bad.stderr and "--set custom.settings.keep=" in bad.stderr
    r = cli(*args, "--set", "custom.settings.keep=6", "--out", tmp_path / "ok")
    assert r.exit_code == 0, r.stderr
    assert all(2 <= p["custom.settings.keep"] <= 10 for p in json.loads((tmp_path / "ok" / "front.json").read_text())["front"])


# ---- (#56 §1, §2) a bounded reader, a deadline per answer, a process owned for its whole life

def _gone(pid: int) -> bool:
    """Whether a process is gone (or a zombie of a parent that is not us: dead, not running)."""
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


#: a process that, at its first call, forks a child that would hold the pipes, writes both pids
#: to ``pids``, then does ``{action}``
OWNED = """    import os
    child = os.fork()
    if child == 0:
        import time
        while True:
            time.sleep(60)
    open({pids!r}, 'w').write(f"{{os.getpid()}} {{child}}\\n")
{action}"""


@pytest.mark.parametrize("path,action,status,said", [
    ("normal end", "    print(json.dumps({'messages': list(range(len(request['messages'])))}), flush=True)", 0, ""),
    ("protocol error", "    print('{\"messages\": [999]}', flush=True)", 2, "kept message 999"),
    ("not json", "    print('nope', flush=True)", 2, "which is not JSON"),
    ("late", "    sys.stdin.read()", 2, "did not answer within 1 s"),
    ("drip", "    import time\n    for _ in range(100):\n        sys.stdout.write(' '); sys.stdout.flush(); "
             "time.sleep(0.3)", 2, "did not answer within 1 s"),
    ("too long", "    sys.stdout.write('[' * (3 << 20)); sys.stdout.flush(); sys.stdin.read()", 2,
     "wrote a line of more than 2 MiB"),
])
def test_the_process_and_what_it_forked_are_ended_and_reaped_on_every_path(cli, tmp_path, monkeypatch, path, action,
                                                                            status, said):
    monkeypatch.setenv("COMPACTLAB_MAX_ANSWER_MB", "2")
    pids = tmp_path / "pids"
    ref = _process(tmp_path, OWNED.format(pids=str(pids), action=action))
    r = cli("replay", SMALL, "-p", ref, "--set", "custom.timeout=1", "-o", tmp_path / "out", "-q")
    assert r.exit_code == status, r.stderr
    assert said in r.stderr and "Traceback" not in r.stderr, r.stderr
    from compactlab.engine.layers.custom import load_step

    load_step(ref).run.stop()  # (the normal end: as at exit)
    for pid in map(int, pids.read_text().split()):
        assert _gone(pid), f"{path}: process {pid} left running"


def test_the_bounded_reader_is_linear_caps_a_line_and_keeps_a_deadline(tmp_path):
    import os
    import threading

    from compactlab.plumbing.lines import BoundedLines, Closed, Late, LineTooLong

    r, w = os.pipe()
    lines = BoundedLines(r, limit=1 << 20, chunk=4096)
    big = b"x" * (900 << 10)
    writer = threading.Thread(target=lambda: (os.write(w, b"one\ntwo"), os.write(w, b" and more\n" + big + b"\n")))
    writer.start()
    assert lines.line(30) == b"one" and lines.line(30) == b"two and more" and lines.line(30) == big
    writer.join()
    with pytest.raises(Late):
        lines.line(0.05)  # (nothing written: the deadline, not a read, ends it)
    threading.Thread(target=lambda: os.write(w, b"y" * (1 << 20) + b"yy")).start()
    with pytest.raises(LineTooLong):
        while True:
            lines.line(30)
    os.write(w, b"tail")
    os.close(w)
    with pytest.raises(Closed) as closed:
        lines.line(30)
    assert closed.value.partial == b"tail"
    os.close(r)


def test_a_policy_whose_step_names_escape_sequences_puts_none_on_the_terminal(cli, tmp_path):
    """(#56 §5) custom.call from a policy file reaches the error line: its control characters are
    shown as escapes, never sent raw (a title change, a cleared screen)."""
    policy = tmp_path / "p.toml"
    policy.write_text('extends = "none"\norder = ["custom"]\n[custom]\nenabled = true\n'
                      'call = "cmd:\\u001b]0;pwned\\u0007\\u001b[2Jnope"\n')
    r = cli("replay", SMALL, "-p", policy, "-o", tmp_path / "out")
    assert r.exit_code == 2 and "cannot start" in r.stderr, r.stderr
    assert "\x1b" not in r.stderr and "\x07" not in r.stderr and "\\x1b]0;pwned\\x07\\x1b[2J" in r.stderr, r.stderr


def test_a_steps_files_are_hashed_in_chunks_for_its_fingerprint(tmp_path, monkeypatch):
    """(#56 §5) Every file a cmd: call names is part of its fingerprint, read a chunk at a time
    (a 6 GB file read whole was a MemoryError): here no read may ask for more than a MiB."""
    import builtins

    from compactlab.engine.layers.custom import load_step

    big = tmp_path / "model.bin"
    with open(big, "wb") as f:
        f.truncate(8 << 20)  # (sparse: 8 MiB of zeros on no disk)
    real_open = builtins.open
    asked: list[int] = []

    class Watched:
        def __init__(self, f):
            self.f = f

        def read(self, n=-1):
            asked.append(n)
            return self.f.read(n)

        def readinto(self, b):
            asked.append(len(b))
            return self.f.readinto(b)

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.f.close()

    def watching(path, *args, **kw):
        f = real_open(path, *args, **kw)
        return Watched(f) if str(path) == str(big) else f

    monkeypatch.setattr(builtins, "open", watching)
    load_step.cache_clear()
    try:
        step = load_step(f"cmd:{PY} -c pass {big}")
    finally:
        load_step.cache_clear()
    assert step.digest and asked and all(0 < n <= 1 << 20 for n in asked), asked[:5]


def test_a_new_conversation_is_sent_whole_to_a_process_that_keeps_state(cli, tmp_path):
    """(#56 §7) The first call of each conversation is sent from 0, all of it, even where the
    process's previous answer (another transcript's) begins with the same messages."""
    seen = tmp_path / "seen"
    ref = _process(tmp_path, f"    open({str(seen)!r}, 'a').write(f\"{{request['call']}} {{request['from']}} "
                             "{len(request['messages'])}\\n\")\n"
                             "    print(json.dumps({'messages': list(range(request['from'] + "
                             "len(request['messages'])))}), flush=True)",
                   hello_answer='{"version": 1, "keeps_state": True}')
    same = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    for f in same:
        f.write_bytes(SMALL.read_bytes())
    r = cli("replay", *same, "-p", ref, "--dry-run", "-q")
    assert r.exit_code == 0, r.stderr
    firsts = [line.split() for line in seen.read_text().splitlines() if line.startswith("0 ")]
    assert len(firsts) == 2 and all(int(f[1]) == 0 and int(f[2]) > 0 for f in firsts), firsts
    later = [line.split() for line in seen.read_text().splitlines() if not line.startswith("0 ")]
    assert any(int(f[1]) > 0 for f in later)  # (and after it, only what changed)


def test_the_bounded_reader_reads_frames_whole_capped_and_by_a_deadline():
    """(#56 §1) The read-ahead reader's batches come as frames through the same reader."""
    import os
    import threading

    from compactlab.plumbing.lines import BoundedLines, Closed, Late, LineTooLong, framed

    r, w = os.pipe()
    frames = BoundedLines(r, limit=1 << 20, chunk=4096)
    body = b"y" * (700 << 10)
    threading.Thread(target=lambda: os.write(w, framed(b"first") + framed(body) + framed(b""))).start()
    assert frames.frame(30) == b"first" and frames.frame(30) == body and frames.frame(30) == b""
    os.write(w, framed(b"x")[:5])
    with pytest.raises(Late):
        frames.frame(0.05)  # (half a header: the deadline ends it)
    r2, w2 = os.pipe()
    big = BoundedLines(r2, limit=1 << 10)
    os.write(w2, (2 << 20).to_bytes(8, "little"))
    with pytest.raises(LineTooLong):
        big.frame(30)
    os.close(w2)
    with pytest.raises(Closed):
        big.frame(30)
    for fd in (r, w, r2):
        os.close(fd)

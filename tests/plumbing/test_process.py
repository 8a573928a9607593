"""Library code leaves the process alone; the command's tricks live in compactlab.plumbing.process."""

from __future__ import annotations

import gc
import os
import subprocess
import sys

import pytest

from helpers import SAMPLES


def test_loading_and_replaying_leave_the_garbage_collector_alone(monkeypatch):
    from compactlab import load_policy, load_transcript, replay

    def forbidden(*args):
        raise AssertionError("library code toggled the garbage collector")

    assert gc.isenabled()
    monkeypatch.setattr(gc, "disable", forbidden)
    monkeypatch.setattr(gc, "freeze", forbidden)
    t = load_transcript(str(SAMPLES / "synth-medium.jsonl"))
    replay(t, load_policy("s08"))
    assert gc.isenabled()


def test_a_job_run_in_a_program_freezes_nothing_of_it_and_the_command_still_freezes(cli, tmp_path):
    """The jobs read transcripts with the collector off (``collector_off``), and froze what was
    alive when it came back on: in a program that runs jobs in its own process (a notebook, a
    service, this test suite through click's runner) every cycle a job left was frozen with it
    and never collected (233,000 objects in a test worker). Outside the command's process the
    collector is now paused for the block and left as it was; the command's process, which ends
    with the command, still freezes (its first pass after a load then skips what was read)."""
    before = gc.get_freeze_count()
    assert gc.isenabled()
    r = cli("replay", SAMPLES / "synth-medium.jsonl", "-o", tmp_path / "r", "-q")
    assert r.exit_code == 0, r.output
    r = cli("compare", SAMPLES / "synth-medium.jsonl", SAMPLES / "synth-small.jsonl", "-p", "s08", "-p", "s06",
            "--jobs", "1", "--dry-run", "-q")
    assert r.exit_code == 0, r.output
    assert gc.get_freeze_count() == before and gc.isenabled()
    code = ("import gc, sys\n"
            "from compactlab.plumbing.process import start\n"
            "start()\n"
            "from compactlab.cli import main\n"
            "try:\n"
            "    main(sys.argv[1:], prog_name='compactlab')\n"
            "except SystemExit:\n"
            "    pass\n"
            "print(gc.get_freeze_count(), gc.isenabled(), file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code, "replay", str(SAMPLES / "synth-medium.jsonl"), "--dry-run",
                           "-q"], capture_output=True, text=True, timeout=120)
    frozen, enabled = done.stderr.split()[-2:]
    assert int(frozen) > 0 and enabled == "True", done.stderr


def test_importing_the_output_module_does_not_touch_the_umask():
    # (in a process of its own: reloaded here, the module would hold classes the commands imported
    # before do not, and a later test's patch of its ``OutputDir`` would miss theirs)
    code = ("import os\n"
            "def forbidden(*args):\n"
            "    raise SystemExit('os.umask called')\n"
            "os.umask = forbidden\n"
            "import compactlab.plumbing.outputs\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_written_files_get_the_umask_mode(tmp_path):
    from compactlab.plumbing.outputs import atomic_write_bytes

    old = os.umask(0o027)
    try:
        atomic_write_bytes(tmp_path / "a", b"x")
        atomic_write_bytes(tmp_path / "b", b"x", mode=0o600)
    finally:
        os.umask(old)
    assert (tmp_path / "a").stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "b").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("args, status", [(["--version"], 0), (["--no-such-option"], 2)])
def test_the_entry_point_exits_with_the_commands_status(args, status):
    import subprocess
    import sys

    from helpers import ROOT

    r = subprocess.run([sys.executable, "-m", "compactlab", *args], capture_output=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == status
    assert r.stdout.startswith(b"compactlab") if status == 0 else r.stderr.startswith(b"error: No such option")


def test_inspect_fits_without_a_replay_and_replays_once_with_the_fit(cli, tmp_path, monkeypatch):
    """inspect fits its calibration on the contexts the recording sent (with no recorded
    compaction: the raw baseline's, no replay), then replays them with the fit for the cache
    ledger: one replay, no more."""
    import orjson

    import compactlab.engine.loop as engine
    from helpers import asst, user, write_jsonl

    msgs = [user("go " * 50)]
    for i in range(6):
        reply = asst(f"step {i} " * 20)
        msgs += [{**reply, "type": "message", "model": "claude-sonnet-4-5",
                  "usage": {"input_tokens": 100 + 150 * i, "output_tokens": 5}}, user(f"more {i} " * 40)]
    path = write_jsonl(tmp_path / "t.jsonl", msgs)
    real, replays = engine.replay, []
    monkeypatch.setattr(engine, "replay", lambda *a, **k: replays.append(1) or real(*a, **k))
    r = cli("inspect", path, "--format", "json")
    assert r.exit_code == 0, r.stderr
    info = orjson.loads(r.stdout)
    assert "calibration" in info and info["cache_ledger"]["calls"] == 6 and len(replays) == 1


def test_the_collector_paused_by_tasks_side_by_side_comes_back_when_the_last_one_leaves():
    import threading

    from compactlab.plumbing.process import collector_paused

    assert gc.isenabled()
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def first() -> None:
        with collector_paused():
            first_in.set()
            second_in.wait()
        seen["after first left"] = gc.isenabled()
        first_out.set()

    def second() -> None:
        first_in.wait()
        with collector_paused():
            second_in.set()
            first_out.wait()
            seen["second still inside"] = gc.isenabled()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"after first left": False, "second still inside": False}
    assert gc.isenabled()


def test_a_paused_collector_that_was_off_stays_off():
    from compactlab.plumbing.process import collector_paused

    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
    with collector_paused():
        with collector_paused():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()


@pytest.mark.parametrize("given, seen", [(None, "1"), ("4", "4")])
def test_the_command_keeps_openblas_to_one_thread_unless_told(given, seen):
    """numpy's OpenBLAS started a thread at import that spun about 80 ms of CPU waiting for work
    (the verdict's bootstrap and Optuna multiply no matrices): the command keeps it to one, and a
    user's own setting stands."""
    import subprocess
    import sys

    from helpers import ROOT

    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    code = ("import sys; sys.argv = ['compactlab', '--version']\n"
            "from compactlab.plumbing import process\n"
            "process.start()\n"
            "import os; print(os.environ['OPENBLAS_NUM_THREADS'])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**env, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == seen


class _Libc:
    """A C library that notes what it is asked (``allocator_kept``'s calls)."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append(("mallopt", param, value))
        return 1

    def malloc_trim(self, pad: int) -> int:
        self.calls.append(("malloc_trim", pad))
        return 1


@pytest.mark.parametrize("mmap, restored", [(None, 128 << 10), ("262144", 262144)])
def test_the_allocator_kept_by_tasks_side_by_side_is_set_back_when_the_last_one_leaves(monkeypatch, mmap, restored):
    """(#59 §5) A Dask nanny sets MALLOC_TRIM_THRESHOLD_=65536: the tasks keep what they free while
    any of them runs, then the thresholds the environment gave, and the free memory handed back."""
    import threading

    from compactlab.plumbing import process

    libc = _Libc()
    monkeypatch.setattr(process, "_glibc", lambda: libc)
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    if mmap is None:
        monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    else:
        monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", mmap)
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, list] = {}

    def first() -> None:
        with process.allocator_kept():
            first_in.set()
            second_in.wait()
        seen["after first left"] = list(libc.calls)
        first_out.set()

    def second() -> None:
        first_in.wait()
        with process.allocator_kept():
            second_in.set()
            first_out.wait()
            os.environ["MALLOC_TRIM_THRESHOLD_"] = "1"  # (what the process started with is set back)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    kept = [("mallopt", process.M_MMAP_THRESHOLD, 32 << 20), ("mallopt", process.M_TRIM_THRESHOLD, 64 << 20)]
    assert seen["after first left"] == kept  # (set once, by the first in; left so while the second runs)
    assert libc.calls == kept + [("mallopt", process.M_MMAP_THRESHOLD, restored),
                                 ("mallopt", process.M_TRIM_THRESHOLD, 65536), ("malloc_trim", 0)]
    assert process.allocator_kept._inside == 0


@pytest.mark.parametrize("trim, tunables", [(None, None), ("", None), ("lots", None), ("-1", None),
                                             ("65536", "glibc.malloc.mmap_threshold=262144")])
def test_the_allocator_is_left_alone_where_the_environment_does_not_set_its_trim_threshold(monkeypatch, trim,
                                                                                          tunables):
    """(or sets the allocator's thresholds in GLIBC_TUNABLES too: what to set back is not known)"""
    from compactlab.plumbing import process

    libc = _Libc()
    monkeypatch.setattr(process, "_glibc", lambda: libc)
    if trim is None:
        monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    else:
        monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", trim)
    if tunables is None:
        monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    else:
        monkeypatch.setenv("GLIBC_TUNABLES", tunables)
    with process.allocator_kept():
        with process.allocator_kept():
            pass
    assert libc.calls == [] and process.allocator_kept._inside == 0


_CHURN = """
import resource, sys
from compactlab.plumbing.process import allocator_kept, _glibc
if _glibc() is None:
    print("no glibc"); sys.exit()
def churn():  # (a buffer of 1 MiB made, touched and freed, 100 times: the page faults it takes)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(100):
        b = bytearray(1 << 20)
        b[::4096] = b"x" * 256
        del b
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
out = churn()
with allocator_kept():
    churn()
    kept = churn()
print(out, kept, churn())
"""


def test_a_task_keeps_the_memory_it_frees_where_a_dask_nanny_would_hand_it_back(tmp_path):
    """glibc for real, as a Dask worker has it: each freed MiB went back to the system and was
    faulted in again (256 pages each time); inside the block it is kept, and after it the
    environment's setting holds again."""
    import subprocess
    import sys

    env = {**os.environ, "MALLOC_TRIM_THRESHOLD_": "65536"}
    env.pop("MALLOC_MMAP_THRESHOLD_", None)
    env.pop("GLIBC_TUNABLES", None)
    got = subprocess.run([sys.executable, "-c", _CHURN], env=env, capture_output=True, text=True, cwd=tmp_path,
                         check=True).stdout.split()
    if got == ["no", "glibc"]:
        pytest.skip("not glibc: allocator_kept does nothing here")
    out, kept, after = map(int, got)
    assert out >= 100 * 200  # (each MiB faulted in again)
    assert kept * 20 < out
    assert after >= 100 * 200  # (the environment's threshold back)


@pytest.mark.parametrize("told", [None, ("MALLOC_TRIM_THRESHOLD_", "65536"), ("MALLOC_TOP_PAD_", "0"),
                                  ("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=262144")])
def test_the_command_has_the_allocator_keep_what_it_frees_unless_the_environment_set_it(monkeypatch, told):
    """``start`` asks the core to have glibc keep what the command frees, with the thresholds a
    task keeps (``allocator_kept``), unless the environment set the allocator's own."""
    from compactlab import core
    from compactlab.plumbing import process

    for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_",
                 "GLIBC_TUNABLES"):
        monkeypatch.delenv(name, raising=False)
    if told is not None:
        monkeypatch.setenv(*told)
    asked: list[tuple[int, int]] = []
    monkeypatch.setattr(core, "keep_freed", lambda mmap, trim: asked.append((mmap, trim)))
    monkeypatch.setattr(process, "_command", False)
    monkeypatch.setattr(process, "readable_streams", lambda: None)
    monkeypatch.setattr("compactlab.plumbing.interrupts.install", lambda: None)
    monkeypatch.setattr(process.gc, "disable", lambda: None)
    process.start()
    assert asked == ([] if told else [(process.KEPT_MMAP, process.KEPT_TRIM)])


def test_the_thresholds_asked_are_set_as_the_native_module_is_loaded_or_at_once(monkeypatch):
    """``core.keep_freed`` sets them on the module when it is loaded, or at once where it already is;
    a module loaded after, as one loaded before, is asked once."""
    from compactlab import core

    class Module:
        API = core.NATIVE_API

        def __init__(self) -> None:
            self.asked: list[tuple[int, int]] = []

        def keep_freed(self, mmap: int, trim: int) -> bool:
            self.asked.append((mmap, trim))
            return True

    module = Module()
    monkeypatch.setattr(core, "_freed_kept", None)
    monkeypatch.setattr("importlib.import_module", lambda name: module)
    core._import.cache_clear()
    try:
        core.keep_freed(1 << 20, 2 << 20)  # (not loaded yet: nothing asked of it)
        assert module.asked == []
        assert core.native_module() is module and module.asked == [(1 << 20, 2 << 20)]
        core.keep_freed(3 << 20, 4 << 20)  # (loaded: asked at once)
        assert module.asked == [(1 << 20, 2 << 20), (3 << 20, 4 << 20)]
    finally:
        core._import.cache_clear()


_BLOCKS = """
import resource, sys
from compactlab import core
from compactlab.plumbing import process
if process._glibc() is None or core.native_module() is None:
    print("no glibc or no native module"); sys.exit()
def blocks():  # (a file's blocks as the reader reads them: made, touched, kept a while, freed)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    kept = []
    for i in range(200):
        b = bytearray((256 << 10) + 4096 * (i % 7))
        b[::4096] = b"x" * len(b[::4096])
        kept.append(b)
        if len(kept) > 8:
            kept.pop(0)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
if sys.argv[1] == "command":
    process.start()
blocks()
print(blocks())
"""


def test_the_commands_process_faults_a_files_blocks_in_once(tmp_path):
    """glibc for real: blocks of a file read, each freed a few blocks later, are faulted in again and
    again by default (the heap's top handed back), and once where the command set the thresholds."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}

    def faults(how: str) -> str:
        return subprocess.run([sys.executable, "-c", _BLOCKS, how], env=env, capture_output=True, text=True,
                              cwd=tmp_path, check=True).stdout.strip()

    default, command = faults("library"), faults("command")
    if default.startswith("no "):
        pytest.skip(f"{default}: the allocator is left as it is")
    assert int(command) * 10 < int(default), (command, default)

"""Library code leaves the process alone; the command's tricks live in compactlab.plumbing.process."""

from __future__ import annotations

import gc
import importlib
import os

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


def test_importing_the_output_module_does_not_touch_the_umask(monkeypatch):
    import compactlab.plumbing.outputs as outputs

    def forbidden(*args):
        raise AssertionError("os.umask called")

    monkeypatch.setattr(os, "umask", forbidden)
    importlib.reload(outputs)


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
    assert r.stdout.startswith(b"compactlab") if status == 0 else r.stderr.startswith(b"Usage:")


def test_inspect_replays_once_to_fit_and_once_with_the_fit(cli, tmp_path, monkeypatch):
    """inspect fits its calibration on the contexts it replayed for the recorded calls, then
    replays them with the fit for the cache ledger: two replays, no more."""
    import orjson

    import compactlab.engine.turns as engine
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
    assert "calibration" in info and info["cache_ledger"]["calls"] == 6 and len(replays) == 2


def _point():
    """A dataclass made now, by whatever ``exec`` dataclasses calls."""
    from dataclasses import dataclass, field

    @dataclass(frozen=True)
    class Point:
        x: int
        y: float = 0.5
        tags: list[str] = field(default_factory=list)

    return Point


def test_the_dataclass_code_kept_makes_the_same_classes_and_compiles_each_once(tmp_path, monkeypatch):
    import dataclasses

    from compactlab.plumbing.process import DataclassCode

    plain = _point()
    memo = DataclassCode(str(tmp_path / "code.marshal"))
    monkeypatch.setattr(dataclasses, "exec", memo.exec, raising=False)
    kept = _point()
    assert memo.added and memo.codes
    p = kept(1, tags=["a"])
    assert (p.x, p.y, p.tags, repr(p)) == (1, 0.5, ["a"], "_point.<locals>.Point(x=1, y=0.5, tags=['a'])") and p == kept(1, tags=["a"])
    # the same annotations (not the names of dataclasses' locals: the code is not compiled under the
    # __future__ import of the module that compiles it)
    assert kept.__init__.__annotations__ == plain.__init__.__annotations__
    assert kept.__init__.__annotations__["return"] is None
    memo.save()
    again = DataclassCode(str(tmp_path / "code.marshal"))  # the next command's
    assert set(again.codes) == set(memo.codes)
    monkeypatch.setattr(dataclasses, "exec", again.exec, raising=False)
    _point()
    assert not again.added  # nothing compiled: all of it read back
    again.save()  # (and nothing to write)


@pytest.mark.parametrize("damage", ["garbage", "not code", "others may write", "another Python's", "a folder"])
def test_dataclass_code_that_is_not_ours_is_not_run(tmp_path, damage):
    import marshal

    from compactlab.plumbing.process import MAGIC, DataclassCode

    path = tmp_path / "code.marshal"
    code = {"x = 1": compile("x = 2", "<string>", "exec")}
    if damage == "garbage":
        path.write_bytes(MAGIC + b"\x00not marshal")
    elif damage == "not code":
        path.write_bytes(MAGIC + marshal.dumps({"def f(): pass": "print('hi')"}))
    elif damage == "others may write":
        path.write_bytes(MAGIC + marshal.dumps(code))
        path.chmod(0o666)
    elif damage == "another Python's":
        path.write_bytes(b"\x00\x00\r\n" + marshal.dumps(code))
    else:
        path.mkdir()
    memo = DataclassCode(str(path))
    assert memo.codes == {}
    ns: dict = {}
    memo.exec("x = 1", None, ns)
    assert ns["x"] == 1
    memo.save()  # written anew where it can be
    assert damage == "a folder" or DataclassCode(str(path)).codes.keys() == {"x = 1"}


def test_the_dataclass_code_goes_beside_the_bytecode_and_not_without_it(monkeypatch, tmp_path):
    import subprocess
    import sys

    from compactlab.plumbing import process
    from helpers import ROOT

    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert process.dataclass_code_path() is None
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    assert process.dataclass_code_path().endswith(f"__pycache__/dataclasses.{sys.implementation.cache_tag}.marshal") \
        or sys.pycache_prefix
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONPYCACHEPREFIX": str(tmp_path / "pyc")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    for _ in range(2):
        r = subprocess.run([sys.executable, "-m", "compactlab", "policies", "list"], capture_output=True, env=env)
        assert r.returncode == 0, r.stderr
    [kept] = (tmp_path / "pyc").rglob("dataclasses.*.marshal")
    written = kept.stat().st_mtime_ns
    subprocess.run([sys.executable, "-m", "compactlab", "policies", "list"], capture_output=True, env=env, check=True)
    assert kept.stat().st_mtime_ns == written  # nothing new compiled: not written again
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    other = tmp_path / "pyc2"
    env["PYTHONPYCACHEPREFIX"] = str(other)
    subprocess.run([sys.executable, "-m", "compactlab", "policies", "list"], capture_output=True, env=env, check=True)
    assert not list(other.rglob("dataclasses.*.marshal"))

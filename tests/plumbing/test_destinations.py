"""Files compactlab writes outside an --out folder (convert -o, synth -o, --junit, --baseline,
bench --json, GITHUB_STEP_SUMMARY): a device is written in place, a pipe, socket or directory is
refused, a symlink is followed, and nothing that is not a regular file is ever renamed over.

Every special file is made here, in a temporary folder; the machine's own /dev is never named."""

from __future__ import annotations

import os
import socket
import stat

import pytest

from compactlab.errors import UsageError
from compactlab.plumbing.outputs import append_text, atomic_write_bytes
from helpers import SAMPLES

SMALL = SAMPLES / "synth-small.jsonl"


@pytest.fixture
def null_device(tmp_path):
    """A character device made like /dev/null (1, 3), in the test's own folder."""
    path = tmp_path / "null"
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        with open(path, "wb") as f:  # a folder mounted nodev refuses to open it
            f.write(b"probe")
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot make or open a character device here ({exc}): needs root on a folder without nodev")
    return path


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def _unchanged(path, kind) -> None:
    assert kind(os.lstat(path).st_mode), f"{path} was replaced"
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")], "a temp file was left"


def test_a_character_device_is_written_in_place(null_device):
    atomic_write_bytes(null_device, b"x" * 100)
    _unchanged(null_device, stat.S_ISCHR)
    append_text(null_device, "more")
    _unchanged(null_device, stat.S_ISCHR)


@pytest.mark.parametrize("kind", ["fifo", "dir", "socket"])
def test_a_pipe_socket_or_folder_is_refused_and_left_alone(tmp_path, kind):
    path = tmp_path / kind
    if kind == "fifo":
        os.mkfifo(path)
        check = stat.S_ISFIFO
    elif kind == "dir":
        path.mkdir()
        check = stat.S_ISDIR
    else:
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(path))
        s.close()
        check = stat.S_ISSOCK
    with pytest.raises(UsageError, match="not a regular file"):
        atomic_write_bytes(path, b"data", what="--junit")
    _unchanged(path, check)
    with pytest.raises(UsageError):
        append_text(path, "text")  # never waits for a reader
    _unchanged(path, check)


def test_a_symlink_is_written_at_its_target(tmp_path):
    target = tmp_path / "real.xml"
    target.write_text("old")
    link = tmp_path / "link.xml"
    link.symlink_to(target)
    atomic_write_bytes(link, b"new")
    assert os.path.islink(link) and target.read_bytes() == b"new"
    pipe_link = tmp_path / "to-pipe"
    os.mkfifo(tmp_path / "p")
    pipe_link.symlink_to(tmp_path / "p")
    with pytest.raises(UsageError, match="named pipe"):
        atomic_write_bytes(pipe_link, b"x")
    assert os.path.islink(pipe_link) and stat.S_ISFIFO(os.stat(pipe_link).st_mode)


def test_a_pipe_put_there_after_the_check_is_not_renamed_over(tmp_path, monkeypatch):
    import compactlab.plumbing.outputs as outputs

    path = tmp_path / "out.jsonl"
    real_mkstemp = outputs.mkstemp

    def racing(*args, **kw):  # the check saw nothing; a FIFO appears before the rename
        made = real_mkstemp(*args, **kw)
        os.mkfifo(path)
        return made

    monkeypatch.setattr(outputs, "mkstemp", racing)
    with pytest.raises(UsageError):
        atomic_write_bytes(path, b"x")
    _unchanged(path, stat.S_ISFIFO)


@pytest.mark.parametrize("command", ["convert", "synth"])
def test_convert_and_synth_never_replace_a_device_or_pipe(cli, null_device, fifo, command):
    def run(dest):
        args = ["convert", SMALL, "-o", dest] if command == "convert" else ["synth", "-o", dest, "--calls", "5"]
        return cli(*args)

    r = run(null_device)
    assert r.exit_code == 0, r.stderr
    _unchanged(null_device, stat.S_ISCHR)
    r = run(fifo)
    assert r.exit_code == 2 and "named pipe" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) <= 2
    _unchanged(fifo, stat.S_ISFIFO)


def test_check_junit_baseline_and_step_summary_never_replace_a_device_or_pipe(cli, tmp_path, null_device, fifo):
    baseline = tmp_path / "baseline.json"
    assert cli("check", SMALL, "--baseline", baseline, "--update-baseline").exit_code == 0
    r = cli("check", SMALL, "--baseline", baseline, "--junit", null_device)
    assert r.exit_code == 0, r.stderr
    _unchanged(null_device, stat.S_ISCHR)
    r = cli("check", SMALL, "--baseline", baseline, "--junit", fifo)
    assert r.exit_code == 2 and "--junit" in r.stderr and "named pipe" in r.stderr
    _unchanged(fifo, stat.S_ISFIFO)
    r = cli("check", SMALL, "--baseline", baseline, env={"GITHUB_STEP_SUMMARY": str(fifo)})
    assert r.exit_code == 2 and "GITHUB_STEP_SUMMARY" in r.stderr
    _unchanged(fifo, stat.S_ISFIFO)
    r = cli("check", SMALL, "--baseline", baseline, env={"GITHUB_STEP_SUMMARY": str(null_device)})
    assert r.exit_code == 0, r.stderr
    r = cli("check", SMALL, "--baseline", fifo, "--update-baseline")
    assert r.exit_code == 2 and "named pipe" in r.stderr
    _unchanged(fifo, stat.S_ISFIFO)
    link = tmp_path / "baseline-link.json"
    link.symlink_to(baseline)
    assert cli("check", SMALL, "--baseline", link, "--update-baseline").exit_code == 0
    assert os.path.islink(link) and baseline.stat().st_size > 0


def test_bench_json_to_a_pipe_is_refused_before_any_work(cli, fifo, monkeypatch):
    import compactlab.bench as bench

    monkeypatch.setattr(bench, "run", lambda **kw: pytest.fail("the bench ran before the destination was checked"))
    r = cli("bench", "--json", fifo)
    assert r.exit_code == 2 and "named pipe" in r.stderr
    _unchanged(fifo, stat.S_ISFIFO)

"""Reruns never mix, baselines are never lost, inputs that are not regular files or are bombs are
refused (issue 15 §2-§4)."""

from __future__ import annotations

import gzip
import os
import threading

import orjson
import pytest

from helpers import SAMPLES, files_under, tool_session, write_jsonl

SMALL = SAMPLES / "synth-small.jsonl"


# -- §2 a rerun never mixes with an earlier run ------------------------------------------------

def test_a_set_variant_gets_its_own_folder_and_a_rerun_replaces_the_earlier_run_whole(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    t = write_jsonl(tmp_path / "t.jsonl", tool_session(12, size=250_000))  # each result over the budget
    assert cli("replay", t, "--chart", "-q").exit_code == 0
    plain = tmp_path / "reports" / "t-s08"
    assert {"chart.svg", "summary.json", "calls.csv"} <= set(files_under(plain))
    assert any(n.startswith("tool-results/") for n in files_under(plain))
    r = cli("replay", t, "--set", "summary.trigger=20000", "--set", "budget.enabled=false", "-q")
    assert r.exit_code == 0
    from compactlab.engine.policy import load_policy

    fp = load_policy("s08", ["summary.trigger=20000", "budget.enabled=false"]).fingerprint
    variant = tmp_path / "reports" / f"t-s08-{fp[:8]}"
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == sorted(["t-s08", variant.name])
    assert orjson.loads((variant / "summary.json").read_bytes())["summary"]["fingerprint"] == fp
    # the same variant into the first folder: it replaces that run whole, no stale chart or results
    assert cli("replay", t, "--set", "summary.trigger=20000", "--set", "budget.enabled=false", "--out", plain,
               "-q").exit_code == 0
    assert set(files_under(plain)) == {".compactlab-run", "summary.json", "calls.csv", "probes.csv", "compactions.csv"}
    assert [p.name for p in (tmp_path / "reports").iterdir() if p.name.startswith(".")] == []


def test_a_folder_the_user_made_is_refused_unless_forced(cli, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "summary.json").write_text("my notes")
    r = cli("replay", SMALL, "--out", mine)
    assert r.exit_code == 2
    assert r.stderr == (f"error: --out {mine}: holds files compactlab did not write (summary.json)\n"
                        "hint: choose another --out, or add --force to replace that folder whole\n")
    assert (mine / "summary.json").read_text() == "my notes"
    r = cli("compare", SMALL, "-p", "s08", "--out", mine, "-q")
    assert r.exit_code == 2 and "did not write" in r.stderr
    assert cli("replay", SMALL, "--out", mine, "--force", "-q").exit_code == 0
    assert orjson.loads((mine / "summary.json").read_bytes())["summary"]["calls"] > 0


def test_a_compare_rerun_replaces_its_folder_whole(cli, tmp_path):
    out = tmp_path / "cmp"
    assert cli("compare", SMALL, SAMPLES / "synth-medium.jsonl", "-p", "s08", "--out", out, "-q").exit_code == 0
    assert (out / "charts" / "tokens-synth-medium.svg").exists()
    assert cli("compare", SMALL, "-p", "s08", "--out", out, "-q").exit_code == 0
    assert not (out / "charts" / "tokens-synth-medium.svg").exists()  # not a stale chart of the earlier run


# -- §3 baselines are never lost ---------------------------------------------------------------

@pytest.fixture
def baseline(cli, tmp_path):
    path = tmp_path / "baseline.json"
    files = [SAMPLES / "synth-small.jsonl", SAMPLES / "synth-medium.jsonl"]
    assert cli("check", *files, "-p", "s08", "-p", "s06", "--baseline", path, "--update-baseline").exit_code == 0
    assert len(orjson.loads(path.read_bytes())["records"]) == 4
    return path


@pytest.mark.parametrize("damage, message", [
    (lambda doc, raw: raw.replace(b'"policy"', b'"polizy"', 1), "record 0 needs transcript, policy"),
    (lambda doc, raw: b"<<<<<<< HEAD\n" + raw + b"=======\n>>>>>>> theirs\n", "not JSON"),
])
def test_update_over_a_damaged_baseline_writes_nothing(cli, baseline, damage, message):
    damaged = damage(None, baseline.read_bytes())
    baseline.write_bytes(damaged)
    r = cli("check", SMALL, "-p", "s08", "--baseline", baseline, "--update-baseline")
    assert r.exit_code == 2 and message in r.stderr and "not updated" in r.stderr
    assert baseline.read_bytes() == damaged


@pytest.mark.parametrize("value", [None, "12", True])
def test_a_non_numeric_metric_is_a_clear_error(cli, baseline, value):
    doc = orjson.loads(baseline.read_bytes())
    doc["records"][0]["metrics"]["overflows"] = value
    baseline.write_bytes(orjson.dumps(doc))
    r = cli("check", SMALL, "-p", "s08", "--baseline", baseline)
    assert r.exit_code == 2 and "record 0: overflows is not a number" in r.stderr


def test_a_symlinked_baseline_is_updated_at_its_target(cli, baseline, tmp_path):
    link = tmp_path / "link.json"
    link.symlink_to(baseline)
    assert cli("check", SAMPLES / "manual-compact.jsonl", "-p", "s08", "--baseline", link,
               "--update-baseline", "-q").exit_code == 0
    assert link.is_symlink() and len(orjson.loads(baseline.read_bytes())["records"]) == 5


@pytest.mark.parametrize("tolerance", ["nan", "inf", "cost_usd=-inf", "reduction=nan"])
def test_a_non_finite_tolerance_is_refused(cli, baseline, tolerance):
    r = cli("check", SMALL, "-p", "s08", "--baseline", baseline, "--tolerance", tolerance)
    assert r.exit_code == 2 and "must be a finite number" in r.stderr


# -- §4 inputs that are not regular files, and bombs -------------------------------------------

def _fifo(tmp_path, name: str):
    path = tmp_path / name
    os.mkfifo(path)
    return path


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_is_refused_at_once_wherever_a_file_is_read(cli, tmp_path, baseline):
    done = threading.Event()
    results = []

    def run() -> None:
        results.append(cli("replay", _fifo(tmp_path, "t.jsonl"), "--dry-run"))
        results.append(cli("check", SMALL, "--baseline", _fifo(tmp_path, "b.json")))
        results.append(cli("replay", SMALL, "-p", _fifo(tmp_path, "p.toml"), "--dry-run"))
        results.append(cli("replay", SMALL, "--prices", _fifo(tmp_path, "prices.toml"), "--dry-run"))
        policy = tmp_path / "ext.toml"
        policy.write_text('extends = "e.toml"\n')
        _fifo(tmp_path, "e.toml")
        results.append(cli("replay", SMALL, "-p", policy, "--dry-run"))
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(60), "an input that is a FIFO blocked"
    for r in results:
        assert r.exit_code == 2 and "is a named pipe, not a regular file" in r.stderr, r.stderr


def test_a_device_is_refused(cli):
    r = cli("replay", "/dev/zero", "--dry-run")
    assert r.exit_code == 2 and r.stderr.startswith("error: /dev/zero: is a character device, not a regular file")


def test_a_gz_line_longer_than_the_limit_is_an_error(cli, tmp_path, monkeypatch):
    path = tmp_path / "bomb.jsonl.gz"
    with gzip.open(path, "wb") as f:
        f.write(b'{"role": "user", "content": "hi"}\n')
        f.write(b"0" * (3 << 20))  # 3 MiB of zeros, no newline
    monkeypatch.setenv("COMPACTLAB_MAX_LINE_MB", "2")
    r = cli("replay", path, "--dry-run")
    assert r.exit_code == 2
    assert r.stderr.startswith(f"error: {path}:2: a line longer than 2 MiB (decompressed)")
    assert "COMPACTLAB_MAX_LINE_MB" in r.stderr


def test_a_json_gz_document_over_the_cap_is_an_error(cli, tmp_path, monkeypatch):
    path = tmp_path / "big.traj.json.gz"
    doc = {"messages": [{"role": "user", "content": "x" * (2 << 20)}], "info": {}}
    with gzip.open(path, "wb") as f:
        f.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    monkeypatch.setenv("COMPACTLAB_MAX_DOCUMENT_MB", "1")
    r = cli("inspect", path)
    assert r.exit_code == 2 and "a JSON document larger than 1 MiB (decompressed)" in r.stderr


def test_endless_blank_lines_end_the_reading(cli, tmp_path):
    path = tmp_path / "blank.jsonl.gz"
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write(b'{"role": "user", "content": "hi"}\n')
        f.write(b"\n" * 200_001)
        f.write(b'{"role": "assistant", "content": "hello"}\n')
    r = cli("replay", path, "--dry-run")
    assert r.exit_code == 2 and "more than 100,000 blank lines in a row" in r.stderr


@pytest.fixture
def zst_file(tmp_path):
    zstandard = pytest.importorskip("zstandard")
    raw = (SAMPLES / "synth-medium.jsonl").read_bytes()
    blob = zstandard.ZstdCompressor(level=3).compress(raw)
    return tmp_path, blob, zstandard


def test_a_zst_cut_at_a_block_boundary_is_an_error(cli, zst_file):
    tmp_path, blob, zstandard = zst_file
    # find a cut the decompressor reads quietly (a block boundary): it yields part of the file, no error
    cut = next(n for n in range(len(blob) // 2, len(blob)) if _quiet_cut(zstandard, blob[:n]))
    path = tmp_path / "cut.jsonl.zst"
    path.write_bytes(blob[:cut])
    r = cli("replay", path, "--dry-run")
    assert r.exit_code == 2
    assert r.stderr.startswith(f"error: {path}: not a whole zstd file: cut short: frame 1 is incomplete")


def _quiet_cut(zstandard, data: bytes) -> bool:
    import io

    try:
        out = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)).read()
    except zstandard.ZstdError:
        return False
    return len(out) > 0


def test_a_zst_cut_mid_frame_says_so_and_several_frames_are_read_whole(cli, zst_file):
    tmp_path, blob, zstandard = zst_file
    path = tmp_path / "head.jsonl.zst"
    path.write_bytes(blob[:9])
    r = cli("replay", path, "--dry-run")
    assert r.exit_code == 2 and "not a whole zstd file: cut short" in r.stderr and "empty" not in r.stderr
    raw = (SAMPLES / "synth-medium.jsonl").read_bytes()
    half = raw.index(b"\n", len(raw) // 2) + 1
    c = zstandard.ZstdCompressor()
    two = tmp_path / "two.jsonl.zst"
    two.write_bytes(c.compress(raw[:half]) + c.compress(raw[half:]))
    a = cli("replay", two, "--dry-run", "--format", "json")
    b = cli("replay", SAMPLES / "synth-medium.jsonl", "--dry-run", "--format", "json")
    assert a.exit_code == 0
    assert orjson.loads(a.stdout)["runs"][0]["summary"]["calls"] == orjson.loads(b.stdout)["runs"][0]["summary"]["calls"]


def test_extends_and_prompt_files_resolve_beside_the_policy_file(cli, tmp_path, monkeypatch):
    folder = tmp_path / "policies"
    folder.mkdir()
    (folder / "base.toml").write_text('extends = "s08"\n[summary]\ntrigger = 12345\nprompt = "prompt.txt"\n')
    (folder / "prompt.txt").write_text("Summarise briefly.")
    (folder / "mine.toml").write_text('extends = "base.toml"\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    from compactlab.engine.policy import load_policy
    from compactlab.summarizers.prompts import prompt_text

    p = load_policy(str(folder / "mine.toml"))
    assert p.summary.trigger == 12345 and prompt_text(p.summary.prompt) == "Summarise briefly."
    (folder / "prompt.txt").unlink()
    r = cli("policies", "show", folder / "mine.toml")
    assert r.exit_code == 2 and "summary.prompt:" in r.stderr and "neither a built-in prompt" in r.stderr


@pytest.mark.parametrize("address", ["dask://", "dask://nohost", "dask://host:notaport", "dask://[::1", "dask://h:1/x",
                                     "tcp://h:1"])
def test_a_malformed_dask_address_is_a_usage_error(cli, address):
    r = cli("compare", SMALL, "-p", "s08", "--executor", address, "--dry-run")
    assert r.exit_code == 2 and r.stderr.startswith(f"error: --executor {address!r}: expected dask://HOST:PORT")

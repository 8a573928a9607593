"""End to end: the CLI against a loopback HTTP server that plays the Messages API."""

from __future__ import annotations

import json
import os

import pytest

from fake_anthropic import FakeAPI
from helpers import SAMPLES

KEY = "sk-ant-e2e-SECRET-abcdef"
T = SAMPLES / "synth-medium.jsonl"


@pytest.fixture
def server(monkeypatch):
    api = FakeAPI()
    url, srv = api.serve()
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    monkeypatch.delenv("ANTHROPIC_MODEL", raising=False)
    yield api
    srv.shutdown()


def _everything_written(tmp_path) -> str:
    return "".join(p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file())


def test_live_replay_cached_rerun_and_no_key_anywhere(cli, server, tmp_path):
    args = ["replay", T, "--summarizer", "anthropic", "--out", tmp_path / "out", "--cache-dir", tmp_path / "cache",
            "--format", "json"]
    r = cli(*args)
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout)["runs"][0]["summary"]
    made = summary["summaries"] + summary["manual"] + summary["reactive"]
    assert made > 0 and len(server.message_requests) == made  # one request per summary
    again = cli(*args)
    assert again.exit_code == 0 and len(server.message_requests) == made  # the rerun made none
    assert json.loads(again.stdout)["runs"][0]["summary"]["cost_usd"] == summary["cost_usd"]  # billed as if made
    for text in (r.stdout, r.stderr, again.stdout, again.stderr, _everything_written(tmp_path)):
        assert KEY not in text


def test_429_then_success_and_529_until_exhausted(cli, server, tmp_path):
    server.script = [(429, "slow down")] + [(529, "Overloaded")] * 3
    r = cli("replay", T, "--summarizer", "anthropic", "--no-cache", "--dry-run", "-p", "s08",
            "--set", "manual.enabled=false")
    assert r.exit_code == 0
    assert "calls that lost their summary" in r.stdout  # the second summary failed after retries
    assert "summar(y/ies) failed" in r.stderr and "HTTP 529" in r.stderr
    assert KEY not in r.stdout + r.stderr


def test_prompt_too_long_is_retried_with_a_smaller_input(cli, server, tmp_path):
    server.script = [(400, "prompt is too long: 300000 tokens > 200000 maximum")]
    r = cli("replay", T, "--summarizer", "anthropic", "--no-cache", "--dry-run", "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["runs"][0]["summary"]["summaries"] > 0
    first, second = server.message_requests[:2]
    assert len(second["body"]["messages"][0]["content"]) < len(first["body"]["messages"][0]["content"])


def test_no_key_exits_2_before_any_work(cli, monkeypatch, tmp_path):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    r = cli("replay", tmp_path / "does-not-exist.jsonl", "--summarizer", "anthropic")
    assert r.exit_code == 2 and "ANTHROPIC_API_KEY is not set" in r.stderr  # not the missing file
    r = cli("replay", T, "--tokens", "anthropic", "--dry-run")
    assert r.exit_code == 2 and "ANTHROPIC_API_KEY" in r.stderr


def test_exact_tokens_from_count_tokens(cli, server, tmp_path):
    r = cli("replay", SAMPLES / "parallel-batch.jsonl", "-p", "none", "--tokens", "anthropic", "--dry-run",
            "--format", "json", "--cache-dir", tmp_path / "c")
    calls = json.loads(r.stdout)["runs"][0]["calls"]
    assert r.exit_code == 0 and all(c["tokens"] == c["raw_tokens"] > 0 for c in calls)
    assert {q["path"] for q in server.requests} == {"/v1/messages/count_tokens"}


def test_compare_with_the_live_summarizer(cli, server, tmp_path):
    args = ["compare", T, "-p", "s08", "-p", "s06", "--summarizer", "anthropic", "--cache-dir", tmp_path / "c",
            "--out", tmp_path / "cmp", "--format", "json", "--jobs", "2"]
    r = cli(*args)
    rows = json.loads(r.stdout)
    assert r.exit_code == 0 and len(rows) == 2 and len(server.message_requests) > 0
    n = len(server.message_requests)
    cli(*args)
    assert len(server.message_requests) == n


def test_the_cache_lives_in_the_users_cache_folder_privately(cli, server, tmp_path, monkeypatch):
    import stat

    work, xdg = tmp_path / "work", tmp_path / "xdg"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    monkeypatch.delenv("COMPACTLAB_CACHE_DIR", raising=False)
    monkeypatch.setattr("sys.platform", "linux")
    # --dry-run writes nothing anywhere: no cache, no reports
    assert cli("replay", T, "--summarizer", "anthropic", "--dry-run", "-q").exit_code == 0
    assert list(work.iterdir()) == [] and not xdg.exists()
    asked = len(server.message_requests)
    assert cli("replay", T, "--summarizer", "anthropic", "--out", tmp_path / "o", "-q").exit_code == 0
    assert list(work.iterdir()) == []  # nothing beside wherever the command stands
    entries = list((xdg / "compactlab" / "summaries").iterdir())
    assert entries and len(server.message_requests) == 2 * asked
    for folder in (xdg / "compactlab", xdg / "compactlab" / "summaries"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert {stat.S_IMODE(e.stat().st_mode) for e in entries} == {0o600}
    # a dry run reads the cache: no request
    assert cli("replay", T, "--summarizer", "anthropic", "--dry-run", "-q").exit_code == 0
    assert len(server.message_requests) == 2 * asked
    monkeypatch.setenv("COMPACTLAB_CACHE_DIR", str(tmp_path / "env-cache"))
    assert cli("replay", T, "--summarizer", "anthropic", "--out", tmp_path / "o", "-q").exit_code == 0
    assert list((tmp_path / "env-cache" / "summaries").iterdir())


def test_a_live_replay_shows_its_progress_call_by_call(cli, server, tmp_path, monkeypatch):
    """(#31 §2) A replay that asks an API has a bar over its calls (a stub replay needs none)."""
    from contextlib import contextmanager

    from compactlab.cli import replay as replay_command

    shown: list[tuple[str, int, int]] = []

    @contextmanager
    def recording(what, total):
        steps = [0]

        def advance(_record):
            steps[0] += 1

        yield advance
        shown.append((what, total, steps[0]))

    monkeypatch.setattr(replay_command, "progress_bar", lambda quiet: recording)
    r = cli("replay", T, "--summarizer", "anthropic", "--cache-dir", tmp_path / "cache", "--dry-run",
            "--format", "json", "-q")
    calls = json.loads(r.stdout)["runs"][0]["summary"]["calls"]
    # (a streamed file's calls are counted as they are read: a bar without an end, UNKNOWN)
    assert r.exit_code == 0 and shown == [(f"replaying {os.path.basename(str(T))}", -1, calls)]
    shown.clear()
    r = cli("replay", T, "--summarizer", "anthropic", "--cache-dir", tmp_path / "cache", "--dry-run", "-q",
            "--tokens", "anthropic", "--format", "json")  # exact counts: loaded whole, its calls known
    assert r.exit_code == 0 and shown == [(f"replaying {os.path.basename(str(T))}", calls, calls)]
    shown.clear()
    assert cli("replay", T, "--dry-run", "-q").exit_code == 0
    assert [total for _, total, _ in shown] == [0]  # the stub: no bar


def test_a_parallel_compare_imports_the_sdk_once_before_its_workers_are_forked(server, tmp_path):
    """The Messages API's SDK costs a process about 1.6 s of CPU to import: a compare with the live
    summarizer imports it before forking its workers (``summarizers.preload``), which inherit it,
    rather than each importing it again."""
    import subprocess
    import sys

    from helpers import ROOT

    log = tmp_path / "imports.log"
    script = (
        "import os, sys\n"
        f"LOG = {str(log)!r}\n"
        "class Spy:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'anthropic':\n"
        "            with open(LOG, 'a') as f:\n"
        "                f.write(f'{os.getpid()}\\n')\n"
        "        return None\n"
        "sys.meta_path.insert(0, Spy())\n"
        "from compactlab.__main__ import main\n"
        "sys.argv = ['compactlab', *sys.argv[1:]]\n"
        "main()\n")
    out = tmp_path / "cmp"
    args = ["compare", SAMPLES / "synth-small.jsonl", SAMPLES / "manual-compact.jsonl", "-p", "s08", "-p", "s06",
            "--summarizer", "anthropic", "--no-cache", "--jobs", "2", "--charts", "none", "--format", "json",
            "--out", out]
    done = subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert done.returncode == 0, done.stderr
    assert len(set(log.read_text().split())) == 1  # (one process imported it: the command, before the fork)
    runs = json.loads(done.stdout)["runs"]
    assert len(runs) == 6 and server.requests, runs  # (both transcripts × s08, s06, none; the summaries asked)

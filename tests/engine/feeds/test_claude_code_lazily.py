"""A Claude Code session read by the native core and loaded with its messages left unread
(``engine/feeds/claude_code_lazily.py``) is the Claude Code loader's transcript, message for
message and fact for fact, and replays alike; a session the native reading does not vouch for is
the loader's, errors included."""

from __future__ import annotations

import io
import os
import pickle
from pathlib import Path
from unittest import mock

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactlab import load_policy, load_transcript, replay
from compactlab.core import in_use
from compactlab.engine.feeds import claude_code_lazily
from compactlab.engine.feeds.read_ahead import LazyEntry
from compactlab.errors import CompactlabError
from compactlab.plumbing.files import MAX_BLANK_LINES, max_line_bytes
from compactlab.transcripts import claude_code
from helpers import ClaudeCodeSession, assert_same_run, examples

pytestmark = pytest.mark.skipif(in_use() is None, reason="the native core is not built here")

LAZY = {"COMPACTLAB_READ_AHEAD": "lazy"}


def _facts(e) -> tuple:
    return (e.chars, e.role, e.origin, e.tool_use_ids, e.tool_names, e.use_files, e.results, e.misplaced_results,
            e.empty, e.has_text, e.message)


def _loaded_both_ways(path: str) -> tuple:
    """(the native reading's transcript or its error, the loader's or its error, whether the native
    core read the session itself)."""
    def attempt(load):
        try:
            return load()
        except CompactlabError as exc:
            return f"{type(exc).__name__}: {exc}"

    with mock.patch.dict(os.environ, LAZY):
        native = attempt(lambda: claude_code_lazily.load_lazily(path))
    with mock.patch.dict(os.environ, {"COMPACTLAB_READ_AHEAD": ""}):  # (a small session's, held in memory)
        held = attempt(lambda: claude_code_lazily.load_lazily(path))
    python = attempt(lambda: load_transcript(path, claude_code.NAME))
    read = in_use().claude_code_lines(path, max_line_bytes(), MAX_BLANK_LINES) is not None
    if isinstance(native, str) or isinstance(held, str):
        assert held == native
    else:
        assert_same_transcript(held, native)
        assert all(e._lazy[0].data is not None for e in held.entries if type(e) is LazyEntry)
    return native, python, read


def assert_same_transcript(a, b) -> None:
    assert [_facts(e) for e in a.entries] == [_facts(e) for e in b.entries]
    for key in ("usage", "metadata", "title", "session_id", "model", "system", "warnings", "format",
                "skipped_lines", "path", "call_positions"):
        assert getattr(a, key) == getattr(b, key), key
    assert ([(c.position, _facts(c.summary), c.trigger, c.pre_tokens, c.time, c.kept) for c in a.compactions]
            == [(c.position, _facts(c.summary), c.trigger, c.pre_tokens, c.time, c.kept) for c in b.compactions])


def _same(path: str) -> bool:
    """Both readings agree; True where the native core read the session itself."""
    native, python, read = _loaded_both_ways(path)
    if isinstance(python, str):
        assert native == python
        return read
    assert not isinstance(native, str), native
    assert_same_transcript(native, python)
    assert all(type(e) is LazyEntry for e in native.entries) == read
    return read


# -- generated sessions ------------------------------------------------------------------------

_TEXTS = st.sampled_from(["", " ", "ok", "line one\nline two", "é\u2028x", 'q"uote\\', "run pytest -q now"])
_IDS = st.sampled_from(["m1", "m2", "m3", "m4"])


@st.composite
def _sessions(draw) -> list:
    """Claude Code lines (dicts, or "" for a blank line) of the kinds the loader reads differently."""
    lines: list = []
    tools: list[str] = []
    n = 0
    for _ in range(draw(st.integers(1, 30))):
        n += 1
        env: dict = {"uuid": f"u{n}", "parentUuid": f"u{n - 1}", "timestamp": draw(st.sampled_from(
            ["2026-01-01T00:00:00Z", "2026-01-01T00:00:01.500Z", "", 5]))}
        if draw(st.booleans()):
            env["sessionId"] = draw(st.sampled_from(["s1", "s2"]))
        if draw(st.integers(0, 5)) == 0:
            env["version"] = draw(st.sampled_from(["2.1.0", "1.0.44", "x" * 50]))
        if draw(st.integers(0, 9)) == 0:
            env["isSidechain"] = True
        kind = draw(st.sampled_from(["assistant"] * 4 + ["user"] * 3 + ["result"] * 3 + [
            "progress", "blank", "boundary", "summary-line", "title", "unknown", "untyped", "numbered",
            "transcript-only", "bare-user"]))
        if kind == "assistant":
            if draw(st.booleans()):
                tid = f"toolu_{n}"
                tools.append(tid)
                block: object = [{"type": "tool_use", "id": tid, "name": "Bash",
                                  "input": {"command": draw(_TEXTS), "file_path": f"src/f{n % 3}.py"}}]
            else:
                block = draw(st.sampled_from([[{"type": "text", "text": "done"}], "plain reply", "",
                                              [{"type": "thinking", "thinking": "hm", "signature": "s"}]]))
            msg: dict = {"role": "assistant", "content": block}
            how = draw(st.integers(0, 3))
            if how:
                msg["id"] = draw(_IDS)
            elif draw(st.booleans()):
                env["requestId"] = draw(st.sampled_from(["req_1", "req_2"]))
            if draw(st.booleans()):
                msg["model"] = draw(st.sampled_from(["claude-sonnet-4-5", "claude-opus-4-6", ""]))
            usage = draw(st.sampled_from([None, "none", {"input_tokens": 3, "output_tokens": 9},
                                          {"input_tokens": 1, "cache_creation_input_tokens": 500,
                                           "cache_read_input_tokens": 2000, "output_tokens": 4,
                                           "cache_creation": {"ephemeral_1h_input_tokens": 200}},
                                          {"input_tokens": None, "output_tokens": 2, "service_tier": "standard"}]))
            if usage is not None:
                msg["usage"] = None if usage == "none" else usage
            lines.append({"type": "assistant", "message": msg, **env})
        elif kind in ("user", "bare-user", "transcript-only"):
            content = draw(st.sampled_from(["go on", "", [{"type": "text", "text": "look"}],
                                            [{"type": "text", "text": "a"}, {"type": "image", "source": {}}]]))
            extra = {"isVisibleInTranscriptOnly": True} if kind == "transcript-only" else {}
            lines.append({"type": "user", "message": {"role": "user", "content": content}, **env, **extra})
        elif kind == "result":
            ids = draw(st.lists(st.sampled_from(tools + ["toolu_unknown"]), min_size=1, max_size=3))
            blocks: list = [{"type": "tool_result", "tool_use_id": t, "content": draw(_TEXTS),
                             **({"is_error": True} if draw(st.booleans()) else {})} for t in ids]
            if draw(st.booleans()):
                blocks.append({"type": "text", "text": "and this"})
            lines.append({"type": "user", "message": {"role": "user", "content": blocks}, **env})
        elif kind == "progress":
            lines.append({"type": draw(st.sampled_from(["progress", "file-history-snapshot", "queue-operation"])),
                          "data": {"n": 1.5}, **env})
        elif kind == "blank":
            lines.append("")
        elif kind == "boundary":
            meta = draw(st.sampled_from([{"trigger": "auto", "preTokens": 150000}, {"trigger": "manual"}, None]))
            lines.append({"type": "system", "subtype": "compact_boundary",
                          **({"compactMetadata": meta} if meta else {}), **env})
            if draw(st.booleans()):
                lines.append({"type": "user", "isCompactSummary": True,
                              "message": {"role": "user", "content": "The summary so far."}, "uuid": f"c{n}"})
        elif kind == "summary-line":
            lines.append({"type": "summary", "summary": draw(st.sampled_from(["", "A title"])), "leafUuid": "u1"})
        elif kind == "title":
            lines.append({"type": "ai-title", "title": "Fix the cache", **env})
        elif kind == "unknown":
            lines.append({"type": "some-new-kind", **env})
        elif kind == "untyped":
            lines.append({"note": "no type", **env})
        else:
            lines.append({"type": 7, **env})
    return lines


def _write(path: Path, lines: list) -> str:
    path.write_bytes(b"".join((orjson.dumps(o) if o != "" else b"") + b"\n" for o in lines))
    return str(path)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=_sessions())
def test_a_generated_session_is_the_loaders_transcript(tmp_path, lines):
    _same(_write(tmp_path / "session.jsonl", lines))


def test_the_native_reading_reads_the_usual_sessions_itself(tmp_path):
    """Not a test that passes by leaving every session to the loader: the usual ones are read."""
    s = ClaudeCodeSession().user("fix it")
    for i in range(20):
        s.assistant(f"m{i}", {"type": "text", "text": "looking"}).assistant(
            f"m{i}", {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": "ls"}})
        s.result(f"t{i}", f"out {i}")
    s.line({"type": "system", "subtype": "compact_boundary", "compactMetadata": {"trigger": "auto", "preTokens": 9},
            "timestamp": "2026-01-01T00:00:00Z"})
    s.line({"type": "user", "isCompactSummary": True, "message": {"role": "user", "content": "summary"}})
    s.user("and now")
    path = s.write(tmp_path / "s.jsonl")
    assert _same(path)
    with mock.patch.dict(os.environ, LAZY):
        t = claude_code_lazily.load_lazily(path)
    assert len(t.entries) == 42 and t.compactions[0].position == 41 and len(t.usage) == 20
    source = t.entries[0]._lazy[0]  # (the memory file, its size once written: what a pickled copy holds)
    assert source.fd >= 0 and source.size == os.fstat(source.fd).st_size > 0
    assert source.recent is None  # (loaded whole: the last pieces written are let go, its replay starts at its first)
    copy = pickle.loads(pickle.dumps(source))
    assert copy.fd == -1 and copy.data == os.pread(source.fd, source.size, 0)


@pytest.mark.parametrize("bad", [
    b'{"type":"user","message":{"role":"assistant","content":"x"}}',  # (its role is not its type)
    b'{"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use"}]}}',  # (no id)
    b'{"type":"assistant","message":{"role":"assistant","content":"x","usage":{"input_tokens":-1}}}',
    b'{"type":"assistant","message":{"role":"assistant","content":"x","usage":{}}}',  # (the loader's zeros)
    b'{"type":"user","isCompactSummary":"yes","message":{"role":"user","content":"x"}}',
    b'{"type":"user","type":"user","message":{"role":"user","content":"x"}}',  # (a key twice)
    b'{"type":"progress","data":{"n":1e999}}',  # (no number orjson reads)
    b'{"type":"progress","data":"\xff"}',  # (not UTF-8: the reader reads it replaced)
    b'{not json',
    b'["a list"]',
    b'{"type":["user"]}',  # (a type no set holds: the loader fails as it fails)
])
def test_a_session_the_native_reading_leaves_is_the_loaders(tmp_path, bad):
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"type":"user","message":{"role":"user","content":"a"}}\n' + bad.replace(b"\\xff", b"\xff")
                     + b'\n{"type":"assistant","message":{"role":"assistant","content":"b","id":"m"}}\n')
    try:
        read = _same(str(path))
    except TypeError:  # (the loader's own failure on an unhashable type: both fail alike)
        with mock.patch.dict(os.environ, LAZY), pytest.raises(TypeError):
            claude_code_lazily.load_lazily(str(path))
        return
    assert not read


def test_a_small_session_is_held_in_memory_and_without_the_native_core_left_to_the_loader(tmp_path, monkeypatch):
    """A session under ``read_ahead.MIN_BYTES`` is read natively with its messages file held in
    memory (no descriptor kept for it: a corpus job holds many); ``COMPACTLAB_READ_AHEAD=0`` or no
    native core leaves it to the loader."""
    path = ClaudeCodeSession().user("hi").assistant("m1", {"type": "text", "text": "yo"}).write(tmp_path / "s.jsonl")
    monkeypatch.delenv("COMPACTLAB_READ_AHEAD", raising=False)
    t = claude_code_lazily.load_lazily(path)
    sources = {id(e._lazy[0]): e._lazy[0] for e in t.entries if type(e) is LazyEntry}
    assert len(sources) == 1 and all(s.fd == -1 and s.data for s in sources.values())
    assert_same_transcript(t, load_transcript(path, claude_code.NAME))
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "0")
    assert claude_code_lazily.load_lazily(path) is None
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "lazy")
    monkeypatch.setattr(claude_code_lazily, "in_use", lambda: None)
    assert claude_code_lazily.load_lazily(path) is None


def test_a_replay_is_the_same_either_way(tmp_path, cli, monkeypatch):
    s = ClaudeCodeSession().user("start")
    for i in range(40):
        s.assistant(f"m{i}", {"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {"file_path": f"f{i % 4}.py"}})
        s.result(f"t{i}", f"def handler_{i}_value(): pass\n" + "x" * 3000)
        s.assistant(f"n{i}", {"type": "text", "text": f"so handler_{i}_value it is"})
        s.user("go on")
    path = s.write(tmp_path / "s.jsonl")
    outs = {}
    read_natively: list[bool] = []
    own = claude_code_lazily._load

    def counted(*args):
        loaded = own(*args)
        read_natively.append(loaded is not None)
        return loaded

    monkeypatch.setattr(claude_code_lazily, "_load", counted)
    for setting in ("0", "lazy"):
        monkeypatch.setenv("COMPACTLAB_READ_AHEAD", setting)
        for policy in ("s08", "claude-code"):
            out = tmp_path / f"{setting}-{policy}"
            r = cli("replay", path, "-p", policy, "--out", str(out), "--format", "json")
            assert r.exit_code == 0, r.output
            summary = orjson.loads((out / "summary.json").read_bytes())
            summary.pop("timing")  # (the run's own time)
            outs[setting, policy] = (summary, {p.name: p.read_bytes() for p in out.iterdir()
                                                if p.is_file() and p.name != "summary.json"})
    assert read_natively == [True, True]  # (each replay's load with "lazy"; none with "0")
    for policy in ("s08", "claude-code"):
        assert outs["0", policy] == outs["lazy", policy]
    assert outs["lazy", "s08"][0]["summary"]["probes"] > 20  # (recall measured: not a run that lost nothing to lose)
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "lazy")
    native = claude_code_lazily.load_lazily(path)
    assert_same_run(replay(native, load_policy("s08")), replay(claude_code.load(path), load_policy("s08")))


def test_every_shared_claude_code_recording(shared_transcripts):
    files = sorted((shared_transcripts / "claude_code").rglob("*.jsonl"))
    assert files
    read = [_same(str(f)) for f in files]
    assert sum(read) >= max(1, 3 * len(files) // 4)  # (the real sessions are the native reading's: all 8 on 2026-12-02)
    for f in files:
        with mock.patch.dict(os.environ, LAZY):
            native = claude_code_lazily.load_lazily(str(f))
        assert_same_run(replay(native, load_policy("s08")), replay(claude_code.load(str(f)), load_policy("s08")))


def test_a_session_cut_short_while_it_is_read_is_said_so(tmp_path, monkeypatch):
    s = ClaudeCodeSession().user("start")
    for i in range(50):
        s.assistant(f"m{i}", {"type": "text", "text": "x" * 200})
    path = s.write(tmp_path / "s.jsonl")
    lines = in_use().claude_code_lines(path, max_line_bytes(), MAX_BLANK_LINES)
    with open(path, "r+b") as f:  # (cut after it was read, before its blocks are read again)
        f.truncate(100)
    with pytest.raises(OSError):
        lines.chunk()

    class Cut:  # (the native core's reading, cut short the same way, as the loading meets it)
        def claude_code_lines(self, *args):
            class Lines:
                def chunk(self):
                    raise OSError(5, "Input/output error")
            return Lines()

    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "lazy")
    monkeypatch.setattr(claude_code_lazily, "in_use", lambda: Cut())
    with pytest.raises(CompactlabError, match="cannot be read again: Input/output error"):
        claude_code_lazily.load_lazily(path)


def test_a_system_without_anonymous_files_or_memory_for_one_loads_by_the_loader(tmp_path, monkeypatch):
    s = ClaudeCodeSession().user("start")
    for i in range(20):
        s.assistant(f"m{i}", {"type": "text", "text": f"reply {i}"}).user("go on")
    path = s.write(tmp_path / "s.jsonl")
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "lazy")
    python = load_transcript(path, claude_code.NAME)

    def refused(*_):
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(os, "memfd_create", refused)
    t = claude_code_lazily.load_lazily(path)
    assert not any(type(e) is LazyEntry for e in t.entries)
    assert_same_transcript(t, python)

    class Full(io.FileIO):  # (the anonymous file's memory used up as it is written)
        def write(self, data):
            raise OSError(28, "No space left on device")

    monkeypatch.undo()
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "lazy")
    monkeypatch.setattr(claude_code_lazily, "open", lambda fd, *a, **k: Full(fd, "r+b"), raising=False)
    t = claude_code_lazily.load_lazily(path)
    assert not any(type(e) is LazyEntry for e in t.entries)
    assert_same_transcript(t, python)


def test_a_message_longer_than_the_line_limit_made_of_lines_under_it(tmp_path, monkeypatch):
    """The reader's line limit holds the session's lines, not the messages they make: three results
    of 0.6 MB, each a line under a limit of 1 MB, are one message of 1.8 MB, as the loader has it."""
    s = ClaudeCodeSession().user("start")
    for i in range(3):
        s.assistant("m0", {"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {"file_path": f"f{i}"}})
    for i in range(3):
        s.user([{"type": "tool_result", "tool_use_id": f"t{i}", "content": "x" * 600_000}])
    path = s.write(tmp_path / "s.jsonl")
    monkeypatch.setenv("COMPACTLAB_MAX_LINE_MB", "1")
    assert _same(path)
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "lazy")
    assert claude_code_lazily.load_lazily(path).entries[-1].chars > 1_800_000

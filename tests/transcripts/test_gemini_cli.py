"""Gemini CLI chat recordings (issue #33 §3): the three shared real recordings (the older JSON
document and the newer append-only JSONL) against figures read independently from their JSON, and
the record shapes of the source (google-gemini/gemini-cli chatRecordingService.ts) on small files
built here."""

from __future__ import annotations

import json

import orjson
import pytest

from compactlab import load_policy, load_transcript, replay
from helpers import inspects_and_round_trips, write_jsonl


def _records(path):
    """The messages of a recording as Gemini CLI would read it back: the latest version of each id."""
    if path.suffix == ".json":
        return json.loads(path.read_text())["messages"]
    by_id = {}
    for line in path.read_text().splitlines():
        o = json.loads(line)
        if "type" in o and "id" in o:
            by_id[o["id"]] = o
    return list(by_id.values())


def test_the_shared_recordings(shared_transcripts):
    files = sorted((shared_transcripts / "gemini_cli").glob("*.json*"))
    assert files
    for path in files:
        records = _records(path)
        t = load_transcript(str(path))
        assert t.format == "gemini-cli", path.name
        gemini = [m for m in records if m["type"] == "gemini"]
        calls = [c for m in gemini for c in m.get("toolCalls") or []]
        assert sum(e.role == "assistant" for e in t.entries) == len(gemini), path.name
        assert sum(len(e.tool_use_ids) for e in t.entries) == len(calls), path.name
        assert sum(len(e.results) for e in t.entries) == len(calls), path.name
        with_tokens = [m for m in gemini if m.get("tokens") and any(m["tokens"].values())]
        assert sum(u["input_tokens"] + u["cache_read_input_tokens"] for u in t.usage.values()) == \
            sum(m["tokens"]["input"] for m in with_tokens), path.name
        assert sum(u["output_tokens"] for u in t.usage.values()) == \
            sum(m["tokens"]["output"] + m["tokens"].get("thoughts", 0) for m in with_tokens), path.name
        assert sum(u["cache_read_input_tokens"] for u in t.usage.values()) == \
            sum(m["tokens"]["cached"] for m in with_tokens), path.name
        assert replay(t, load_policy("gemini-cli")).summary.violations_introduced == 0, path.name


def test_the_jsonl_shape_as_the_source_writes_it(tmp_path, cli):
    """Built from chatRecordingService.ts's records: a metadata line, $set lines, a message written
    again with its completed tool calls (the latest counts, in its first place), info lines that
    are the CLI's own, a failed tool call."""
    meta = {"sessionId": "s-1", "projectHash": "ab12", "startTime": "2026-01-01T00:00:00Z",
            "lastUpdated": "2026-01-01T00:00:00Z", "kind": "main"}
    user = {"id": "u1", "timestamp": "2026-01-01T00:00:01Z", "type": "user", "content": [{"text": "fix it"}]}
    pending = {"id": "g1", "timestamp": "2026-01-01T00:00:02Z", "type": "gemini", "content": "",
               "tokens": {"input": 0, "output": 0, "cached": 0, "total": 0}, "model": "gemini-3-flash-preview"}
    done = {**pending, "content": "Reading.", "thoughts": [{"subject": "Plan", "description": "read first",
                                                           "timestamp": "2026-01-01T00:00:02Z"}],
            "tokens": {"input": 1000, "output": 20, "cached": 600, "thoughts": 30, "tool": 0, "total": 1050},
            "toolCalls": [{"id": "c1", "name": "read_file", "args": {"file_path": "a.py"}, "status": "success",
                           "result": [{"functionResponse": {"id": "c1", "name": "read_file",
                                                            "response": {"output": "print(1)"}}}]},
                          {"id": "c2", "name": "run_shell_command", "args": {"command": "false"}, "status": "error",
                           "result": [{"functionResponse": {"id": "c2", "name": "run_shell_command",
                                                            "response": {"error": "exit 1"}}}]}]}
    final = {"id": "g2", "timestamp": "2026-01-01T00:00:03Z", "type": "gemini", "content": "Done.",
             "tokens": {"input": 1200, "output": 5, "cached": 1000, "total": 1205}, "model": "gemini-3-flash-preview"}
    info = {"id": "i1", "timestamp": "2026-01-01T00:00:04Z", "type": "info", "content": "Session saved."}
    path = write_jsonl(tmp_path / "session-1.jsonl", [meta, user, {"$set": {"lastUpdated": "x"}}, pending, done,
                                                      {"$set": {"lastUpdated": "y"}}, final, info])
    t = load_transcript(str(path))
    assert t.format == "gemini-cli" and t.session_id == "s-1" and t.model == "gemini-3-flash-preview"
    assert [e.role for e in t.entries] == ["user", "assistant", "user", "assistant"]
    reply = t.entries[1].message["content"]
    assert [b["type"] for b in reply] == ["thinking", "text", "tool_use", "tool_use"]
    assert reply[0]["thinking"] == "Plan: read first" and reply[2]["input"] == {"file_path": "a.py"}
    results = t.entries[2].message["content"]
    assert [(r["tool_use_id"], r["content"], r.get("is_error", False)) for r in results] == \
        [("c1", "print(1)", False), ("c2", "exit 1", True)]
    assert t.usage[1] == {"input_tokens": 400, "cache_read_input_tokens": 600, "cache_creation_input_tokens": 0,
                          "output_tokens": 50, "model": "gemini-3-flash-preview", "timestamp": "2026-01-01T00:00:02Z"}
    assert t.metadata["cli_messages"] == 1
    inspects_and_round_trips(cli, path, tmp_path)
    document = tmp_path / "session-1.json"
    document.write_bytes(orjson.dumps({**meta, "messages": [user, done, final, info]}))
    assert [e.message for e in load_transcript(str(document)).entries] == [e.message for e in t.entries]


def test_a_bad_record_names_its_line(tmp_path, cli):
    meta = {"sessionId": "s-1", "projectHash": "ab12", "startTime": "t", "lastUpdated": "t"}
    path = write_jsonl(tmp_path / "bad.jsonl", [meta, {"id": "u1", "timestamp": "t", "type": "user", "content": "x"},
                                                {"id": "g1", "timestamp": "t", "type": "gemini", "content": "y"},
                                                {"id": "z", "timestamp": "t", "type": "mystery"}])
    r = cli("inspect", path)
    assert r.exit_code == 2 and f"{path}:4: not a Gemini CLI record" in r.stderr
    skipped = cli("inspect", path, "--skip-bad-lines", "--format", "json")
    assert skipped.exit_code == 0 and json.loads(skipped.stdout)["skipped_lines"] == 1


@pytest.mark.parametrize("tokens", [{"input": -5}, {"input": "many"}])
def test_a_malformed_token_count_is_an_input_error(tmp_path, cli, tokens):
    meta = {"sessionId": "s-1", "projectHash": "ab12", "startTime": "t", "lastUpdated": "t"}
    path = write_jsonl(tmp_path / "bad.jsonl", [meta, {"id": "u1", "timestamp": "t", "type": "user", "content": "x"},
                                                {"id": "g1", "timestamp": "t", "type": "gemini", "content": "y",
                                                 "tokens": tokens}])
    r = cli("inspect", path)
    assert r.exit_code == 2 and "message g1: tokens.input is" in r.stderr


def test_a_jsonl_session_named_by_its_format_reads_as_detected(tmp_path, cli):
    """(#55: found by the path-equivalence test) `--input-format gemini-cli` on a JSONL session,
    and tune's share workers, which name the format they detected: it was read as one broken JSON
    document ("unexpected content after document")."""
    import orjson

    from compactlab import load_transcript

    lines = [{"sessionId": "s1", "projectHash": "p", "startTime": "2026-04-23T12:52:52.759Z",
              "lastUpdated": "2026-04-23T12:52:52.759Z", "kind": "main"},
             {"id": "u1", "timestamp": "2026-04-23T12:52:53Z", "type": "user", "content": "hi"},
             {"id": "g1", "timestamp": "2026-04-23T12:52:54Z", "type": "gemini", "content": "hello",
              "tokens": {"input": 10, "output": 2, "cached": 0, "total": 12}, "model": "gemini-3-flash"}]
    path = tmp_path / "session.jsonl"
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    detected, named = load_transcript(str(path)), load_transcript(str(path), "gemini-cli")
    assert [e.message for e in named.entries] == [e.message for e in detected.entries] and named.usage == detected.usage
    assert cli("replay", path, "--input-format", "gemini-cli", "--dry-run", "-q").exit_code == 0


def test_inspect_shows_a_cache_break_after_a_call_that_recorded_no_usage(tmp_path, cli):
    """(#55, found by the path-equivalence test on the shared 2025-10-11 session) A whole miss
    right after a call with no usage: inspect failed with an internal error (KeyError)."""
    import orjson

    def gemini(i, tokens=None):
        m = {"id": f"g{i}", "timestamp": f"2026-11-27T00:00:{10 + i:02d}Z", "type": "gemini", "content": f"step {i}",
             "model": "gemini-2.5-flash"}
        return {**m, "tokens": tokens} if tokens else m

    def user(i):
        return {"id": f"u{i}", "timestamp": f"2026-11-27T00:00:{i:02d}Z", "type": "user", "content": "x" * 4000}

    messages = [user(0), gemini(1, {"input": 30000, "output": 10, "cached": 0, "total": 30010}), user(2), gemini(3),
                user(4), gemini(5, {"input": 32000, "output": 10, "cached": 0, "total": 32010})]
    doc = {"sessionId": "g", "projectHash": "p", "startTime": "2026-11-27T00:00:00Z",
           "lastUpdated": "2026-11-27T00:01:00Z", "messages": messages}
    path = tmp_path / "session.json"
    path.write_bytes(orjson.dumps(doc))
    r = cli("inspect", path)
    assert r.exit_code == 0, r.stderr
    assert "call 2 read 0 (the call before recorded no usage)" in r.stdout, r.stdout


#: ccusage's cost of each shared Gemini CLI session (``ccusage gemini session --json --offline``,
#: ccusage 20.0.11 @ 5816e64 built here with LiteLLM 1.110.2's price table, Gemini models kept in
#: its embedded prices): input, cache reads, output and thoughts, as ccusage reads them
CCUSAGE = {"gemini.jsonl": 0.15896305, "test_conversation_gemini.2025-10-11.json": 0.107725625,
           "test_conversation_gemini.2026-03-27.json": 0.3323012}


@pytest.mark.parametrize("name", sorted(CCUSAGE))
def test_recorded_cost_is_ccusages(name):
    """(#58 §3) On the same tokens, a Gemini CLI session's recorded cost is ccusage's (to a
    hundredth of a cent): the cached part of the prompt at the cache-read price, thoughts at the
    output price, the calls that recorded no usage at nothing."""
    from helpers import SHARED

    path = SHARED / "transcripts" / "gemini_cli" / name
    if not path.is_file():
        pytest.skip(f"../shared/transcripts/gemini_cli/{name} is not beside the project")
    summary = replay(load_transcript(str(path)), load_policy("none")).summary
    assert summary.recorded_cost_usd == pytest.approx(CCUSAGE[name], abs=0.0001)


def test_a_converted_recording_replays_as_its_source(tmp_path, cli):
    """A Gemini CLI session that switched model replayed on another window, at another model's
    prices for its summary, once converted: the converted file was judged on the model's window in
    genai-prices (1,000,000) where its source was on Gemini CLI's token limit (1,048,576), and its
    model was its last reply's where the source's was its first. The window now follows the format
    the file recorded, and every format's model is its last reply's."""
    meta = {"sessionId": "s-2", "projectHash": "ab12", "startTime": "2026-01-01T00:00:00Z", "kind": "main"}
    user = {"id": "u1", "timestamp": "2026-01-01T00:00:01Z", "type": "user", "content": [{"text": "fix it " * 400}]}
    first = {"id": "g1", "timestamp": "2026-01-01T00:00:02Z", "type": "gemini", "content": "Reading.",
             "tokens": {"input": 1000, "output": 20, "cached": 0, "total": 1020}, "model": "gemini-3-flash-preview",
             "toolCalls": [{"id": "c1", "name": "read_file", "args": {"file_path": "a.py"}, "status": "success",
                            "result": [{"functionResponse": {"id": "c1", "name": "read_file",
                                                             "response": {"output": "x = 1\n" * 3000}}}]}]}
    last = {"id": "g2", "timestamp": "2026-01-01T00:00:03Z", "type": "gemini", "content": "Done.",
            "tokens": {"input": 6000, "output": 5, "cached": 800, "total": 6005}, "model": "gemini-3.1-pro-preview"}
    path = write_jsonl(tmp_path / "session-2.jsonl", [meta, user, first, last])
    assert load_transcript(str(path)).model == "gemini-3.1-pro-preview"
    r = cli("convert", path, "-o", tmp_path / "converted.jsonl")
    assert r.exit_code == 0, r.stderr
    runs = []
    for source in (path, tmp_path / "converted.jsonl"):
        r = cli("replay", source, "-p", "s08", "--set", "summary.trigger=2000", "--format", "json", "--dry-run")
        assert r.exit_code == 0, r.stderr
        runs.append(json.loads(r.stdout)["runs"][0]["summary"])
    source, converted = runs
    assert source["window_tokens"] == 1_048_576 and source["summaries"] > 0
    assert converted["format"] == "anthropic" and converted["recorded_format"] == "gemini-cli"
    differ = {k for k in source if k not in ("transcript", "format", "recorded_format", "runtime_s")
              and source[k] != converted.get(k)}
    assert not differ, {k: (source[k], converted.get(k)) for k in differ}

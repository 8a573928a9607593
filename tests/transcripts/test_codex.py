"""Codex CLI rollouts (#19 §1): one call per model response, usage from the token_count after it,
redacted texts sized by their length, a compacted line as a recorded compaction."""

from __future__ import annotations

import json

import orjson
import pytest

from compactlab import load_policy, load_transcript, replay
from compactlab.corpus.calibration import calibrate
from compactlab.transcripts.messages import content_size, json_len, sized_placeholder
from helpers import write_jsonl


def _rollouts(shared_transcripts):
    files = sorted((shared_transcripts / "codex").glob("rollout-*.jsonl"))
    if not files:
        pytest.skip("no Codex rollout in ../shared/transcripts/codex")
    return files


def _what_the_file_holds(path) -> tuple[int, int, int]:
    """(model responses, tool calls, compacted lines), counted from the raw lines."""
    calls = tools = compacted = 0
    last_total = None
    for line in path.read_text().splitlines():
        o = json.loads(line)
        p = o.get("payload") or {}
        if o["type"] == "event_msg" and p.get("type") == "token_count" and p.get("info"):
            total = p["info"].get("total_token_usage")
            calls += total != last_total
            last_total = total
        elif o["type"] == "response_item" and p.get("type") in ("function_call", "custom_tool_call"):
            tools += 1
        elif o["type"] == "compacted":
            compacted += 1
    return calls, tools, compacted


def test_every_shared_rollout_loads_whole_and_calibrates(shared_transcripts, cli, tmp_path):
    for path in _rollouts(shared_transcripts):
        t = load_transcript(str(path))
        calls, tools, compacted = _what_the_file_holds(path)
        assert t.format == "codex" and len(t.call_positions) == calls, path.name
        assert sum(len(e.tool_use_ids) for e in t.entries) == tools and len(t.compactions) == compacted
        none = replay(t, load_policy("none"))
        assert none.summary.violations == [], path.name  # a well-formed log: nothing inherited
        assert len(t.usage) == calls and all(u["model"] for u in t.usage.values())
        cal = calibrate(t)
        assert cal.mape <= 0.10, (path.name, cal)
        assert t.metadata["redacted_texts"] > 0
        info = orjson.loads(cli("inspect", path, "--format", "json").stdout)
        assert info["format"] == "codex" and info["redacted_texts"] == t.metadata["redacted_texts"]
        assert info.get("model_context_window", 0) > 0
        out = tmp_path / f"{path.stem}.jsonl"  # convert round-trips
        assert cli("convert", path, "-o", out, "-q").exit_code == 0
        a = replay(t, load_policy("s08")).to_dict()["calls"]
        assert a == replay(load_transcript(str(out)), load_policy("s08")).to_dict()["calls"], path.name


def test_a_small_rollout_in_detail(tmp_path):
    def item(payload):
        return {"timestamp": "2026-02-23T11:40:29.000Z", "type": "response_item", "payload": payload}

    def tokens(total, last):
        return {"timestamp": "2026-02-23T11:40:30.000Z", "type": "event_msg",
                "payload": {"type": "token_count", "info": {"total_token_usage": {"input_tokens": total},
                                                            "last_token_usage": last}}}

    lines = [
        {"timestamp": "t", "type": "session_meta", "payload": {"id": "s1", "base_instructions": {"text": "be good"}}},
        {"timestamp": "t", "type": "turn_context", "payload": {"model": "gpt-5.3-codex"}},
        item({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "rules"}]}),
        item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "[REDACTED_TEXT len=40 sha=ab12]"}]}),
        item({"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}], "encrypted_content": "zz"}),
        item({"type": "function_call", "name": "shell", "arguments": "{\"cmd\": \"ls\"}", "call_id": "c1"}),
        tokens(100, {"input_tokens": 100, "cached_input_tokens": 60, "output_tokens": 7}),
        tokens(100, {"input_tokens": 100, "cached_input_tokens": 60, "output_tokens": 7}),  # the same call again
        item({"type": "function_call_output", "call_id": "c1", "output": "a b c"}),
        item({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}),
        item({"type": "web_search_call", "id": "ws1", "action": {"query": "x"}}),
        tokens(250, {"input_tokens": 150, "cached_input_tokens": 100, "output_tokens": 3}),
    ]
    t = load_transcript(str(write_jsonl(tmp_path / "rollout.jsonl", lines)))
    assert t.format == "codex" and t.model == "gpt-5.3-codex" and t.system == "be good\n\nrules"
    assert [e.role for e in t.entries] == ["user", "assistant", "user", "assistant"]
    redacted = t.entries[0].message["content"][0]["text"]  # a redacted text, sized as its length
    assert redacted == sized_placeholder("REDACTED_TEXT", 40, " sha=ab12") and content_size(redacted) == 40
    first = t.entries[1].message["content"]
    assert [b["type"] for b in first] == ["thinking", "tool_use"] and first[1]["id"] == "c1"
    assert t.entries[2].message["content"] == [{"type": "tool_result", "tool_use_id": "c1", "content": "a b c"}]
    assert [b["type"] for b in t.entries[3].message["content"]] == ["text", "server_tool_use"]
    assert t.usage[1]["input_tokens"] == 40 and t.usage[1]["cache_read_input_tokens"] == 60
    assert t.usage[3]["output_tokens"] == 3 and t.usage[1]["model"] == "gpt-5.3-codex"
    assert replay(t, load_policy("none")).summary.violations == []


def test_the_codex_sessions_folder_is_searched_by_date(shared_transcripts, cli, tmp_path):
    import shutil

    day = tmp_path / "sessions" / "2026" / "02" / "23"
    day.mkdir(parents=True)
    for path in _rollouts(shared_transcripts):
        shutil.copy(path, day / path.name)
    r = cli("inspect", tmp_path / "sessions", "--format", "json")
    assert r.exit_code == 0, r.output
    sessions = orjson.loads(r.stdout)["sessions"]
    assert len(sessions) == len(_rollouts(shared_transcripts)) and {s["format"] for s in sessions} == {"codex"}


def test_a_compacted_line_is_a_recorded_compaction_without_the_shared_folder(tmp_path):
    """(#25 §8) The ``compacted`` handler on a small rollout: the history Codex restarted from (its
    messages' texts and its compaction item) is the summary, at the position of the next message,
    and a replay with --keep-recorded-compactions restarts from it."""
    def at(i: int) -> str:
        return f"2026-02-23T11:40:{i:02d}.000Z"

    def item(i, payload):
        return {"timestamp": at(i), "type": "response_item", "payload": payload}

    def tokens(i, total, prompt):
        return {"timestamp": at(i), "type": "event_msg", "payload": {"type": "token_count", "info": {
            "total_token_usage": {"input_tokens": total}, "last_token_usage": {"input_tokens": prompt, "output_tokens": 5}}}}

    lines = [
        {"timestamp": at(0), "type": "turn_context", "payload": {"model": "gpt-5.3-codex"}},
        item(1, {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix the parser"}]}),
        item(2, {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"}),
        tokens(3, 100, 100),
        item(4, {"type": "function_call_output", "call_id": "c1", "output": "x" * 3000}),
        item(5, {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "found it"}]}),
        tokens(6, 300, 200),
        {"timestamp": at(7), "type": "compacted", "payload": {"message": "", "replacement_history": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix the parser"}]},
            {"type": "compaction", "encrypted_content": "[REDACTED_TEXT len=120 sha=ab]"}]}},
        item(8, {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go on"}]}),
        item(9, {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}),
        tokens(10, 400, 90),
    ]
    t = load_transcript(str(write_jsonl(tmp_path / "rollout.jsonl", lines)))
    assert len(t.compactions) == 1
    c = t.compactions[0]
    assert c.trigger == "auto" and c.position == 4  # before "go on": user, call, result, call | user, call
    assert c.summary.message["content"] == "fix the parser\n\n" + sized_placeholder("REDACTED_TEXT", 120, " sha=ab")
    assert c.summary.chars == json_len({"role": "user", "content": "fix the parser\n\n" + "·" * 120})
    assert [e.role for e in t.entries] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    plain = replay(t, load_policy("none"))
    restarted = replay(t, load_policy("none"), keep_recorded_compactions=True)
    assert restarted.calls[-1].messages == 2 < plain.calls[-1].messages == 5  # the summary and "go on"
    assert restarted.summary.violations_introduced == 0


def test_a_rollout_that_names_no_model_is_unpriced_and_says_so(tmp_path, cli):
    """(#58 §3) A rollout with no model (a Codex Desktop one) is never priced as another
    provider's model: unpriced, with a line, unless --price-model names one."""
    from compactlab.engine.cost.pricing import recorded_total
    from compactlab.transcripts.codex import NO_MODEL

    lines = [
        {"timestamp": "t", "type": "session_meta", "payload": {"id": "s1"}},
        {"timestamp": "2026-02-23T11:40:29.000Z", "type": "response_item",
         "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}},
        {"timestamp": "2026-02-23T11:40:29.000Z", "type": "response_item",
         "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hello"}]}},
        {"timestamp": "2026-02-23T11:40:30.000Z", "type": "event_msg",
         "payload": {"type": "token_count", "info": {"total_token_usage": {"input_tokens": 900},
                                                     "last_token_usage": {"input_tokens": 900, "output_tokens": 5}}}},
    ]
    path = write_jsonl(tmp_path / "rollout.jsonl", lines)
    t = load_transcript(str(path))
    assert t.model == NO_MODEL and any("records no model" in w for w in t.warnings)
    assert recorded_total(t) == 0.0
    r = cli("replay", path, "-p", "none", "--out", tmp_path / "r")
    assert r.exit_code == 0 and "unpriced" in r.stderr and "claude" not in r.stderr.lower(), r.stderr
    priced = cli("replay", path, "-p", "none", "--out", tmp_path / "p", "--price-model", "gpt-5", "--format", "json")
    assert json.loads(priced.stdout)["runs"][0]["summary"]["recorded_cost_usd"] > 0

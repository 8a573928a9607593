"""OpenAI-style chat messages, mini-swe-agent and SWE-agent trajectories."""

from __future__ import annotations

import json
import shutil

import orjson
import pytest

from compactlab import load_policy, load_transcript, replay
from compactlab.corpus.calibration import calibrate
from compactlab.errors import InputError

MINI = "mini-swe-agent__deepseek-chat__django__django-11910.traj.json"
SWE = "swe-agent__function_calling_replace_from_source__marshmallow-code__marshmallow-1867.traj"


def call(cid: str, name: str = "bash", args: str = '{"command": "ls"}') -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


CHAT = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Fix the failing test."},
    # parallel tool calls, reasoning, an empty content
    {"role": "assistant", "content": "", "reasoning_content": "Two things to look at.",
     "tool_calls": [call("c1", "read", '{"path": "a.py"}'), call("c2")],
     "usage": {"prompt_tokens": 120, "completion_tokens": 30, "prompt_tokens_details": {"cached_tokens": 100}}},
    {"role": "tool", "tool_call_id": "c1", "content": "print('a')"},
    {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "a.py b.py"}]},
    # arguments that are not JSON
    {"role": "assistant", "content": None, "tool_calls": [call("c3", "bash", "ls -la {broken")]},
    {"role": "tool", "tool_call_id": "c3", "content": "total 0"},
    {"role": "user", "content": [{"type": "text", "text": "also check b.py"}]},
    {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
    {"role": "exit", "content": "submitted"},
]


def test_mapping_of_a_chat(tmp_path):
    p = tmp_path / "chat.jsonl"
    p.write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in CHAT))
    t = load_transcript(str(p))
    assert t.format == "openai" and t.system == "You are a coding agent."
    m = t.messages
    assert [x["role"] for x in m] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert m[1]["content"][0] == {"type": "thinking", "thinking": "Two things to look at."}
    assert [(b["type"], b.get("id"), b.get("input")) for b in m[1]["content"][1:]] == [
        ("tool_use", "c1", {"path": "a.py"}), ("tool_use", "c2", {"command": "ls"})]
    assert [b["tool_use_id"] for b in m[2]["content"]] == ["c1", "c2"]
    assert m[2]["content"][1]["content"] == [{"type": "text", "text": "a.py b.py"}]  # list-form kept
    assert m[3]["content"] == [{"type": "tool_use", "id": "c3", "name": "bash", "input": "ls -la {broken"}]
    # the tool result comes first, then the user's text, in one user message
    assert [b["type"] for b in m[4]["content"]] == ["tool_result", "text"]
    assert t.metadata["invalid_arguments"] == 1
    assert t.metadata["other_roles"] == [{"role": "exit", "where": 10, "chars": 9}]
    assert t.usage[1]["prompt_tokens"] == 120 and t.usage[1]["cache_read_input_tokens"] == 100
    s = replay(t, load_policy("none")).summary
    assert s.calls == 3 and s.violations == []


def test_a_json_list_and_a_messages_document_load_the_same(tmp_path):
    lines, listed, wrapped = tmp_path / "a.jsonl", tmp_path / "b.json", tmp_path / "c.json"
    lines.write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in CHAT))
    listed.write_text(json.dumps(CHAT, indent=2))
    wrapped.write_text(json.dumps({"messages": CHAT}, indent=2))
    a, b, c = (load_transcript(str(p)) for p in (lines, listed, wrapped))
    assert a.messages == b.messages == c.messages and b.format == c.format == "openai"


def test_a_tool_message_with_no_call_is_an_inherited_orphan(tmp_path):
    msgs = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "ok", "tool_calls": [call("x1")]},
            {"role": "tool", "tool_call_id": "x1", "content": "fine"},
            {"role": "tool", "tool_call_id": "ghost", "content": "from nowhere"},
            {"role": "assistant", "content": "done"}]
    p = tmp_path / "t.jsonl"
    p.write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in msgs))
    s = replay(load_transcript(str(p)), load_policy("s08")).summary
    assert [(v["kind"], v["tool_use_id"], v["introduced"]) for v in s.violations] == [("orphan_tool_result", "ghost", False)]


def test_bad_messages_in_a_document(tmp_path):
    p = tmp_path / "t.json"
    p.write_text(json.dumps([{"role": "user", "content": "go"}, {"role": "assistant", "tool_calls": "nope"},
                             {"role": "assistant", "content": "ok", "tool_calls": []}]))
    with pytest.raises(InputError, match=r"t.json: message 1: tool_calls is not a list"):
        load_transcript(str(p), input_format="openai")
    t = load_transcript(str(p), input_format="openai", skip_bad_lines=True)
    assert t.skipped_lines == 1 and len(t.call_positions) == 1
    broken = tmp_path / "broken.json"
    broken.write_text('[\n  {"role": "user",\n  "content": \n')
    with pytest.raises(InputError, match=r"broken.json:\d+: invalid JSON document"):
        load_transcript(str(broken))


def test_detection_is_by_content_not_by_name(shared_transcripts, tmp_path):
    mini = tmp_path / "looks-like.jsonl"
    shutil.copy(shared_transcripts / "openai" / MINI, mini)
    assert load_transcript(str(mini)).format == "mini-swe-agent"
    swe = tmp_path / "trajectory.traj.json"
    shutil.copy(shared_transcripts / "openai" / SWE, swe)
    assert load_transcript(str(swe)).format == "swe-agent"
    # --input-format forces a format: the mini trajectory read as plain OpenAI chat
    forced = load_transcript(str(mini), input_format="openai")
    assert forced.format == "openai" and len(forced.call_positions) == 138


def test_real_trajectories(shared_transcripts, cli, tmp_path):
    checked = 0
    for name, fmt, calls in ((MINI, "mini-swe-agent", 138), (SWE, "swe-agent", 13)):
        path = shared_transcripts / "openai" / name
        doc = json.loads(path.read_text())
        history = doc.get("messages") or doc.get("history")
        assert calls == sum(1 for m in history if m["role"] == "assistant")
        t = load_transcript(str(path))
        assert t.format == fmt and len(t.call_positions) == calls
        for args in (("replay", path, "--dry-run", "-q"), ("inspect", path, "--format", "json"),
                     ("compare", path, "-p", "s08", "-p", "observation-masking", "--dry-run", "--format", "csv", "-q")):
            assert cli(*args).exit_code == 0, args
        out = tmp_path / f"{fmt}.jsonl"
        assert cli("convert", path, "-o", out, "-q").exit_code == 0
        for policy in ("s08", "observation-masking"):
            a = replay(t, load_policy(policy)).to_dict()["calls"]
            assert a == replay(load_transcript(str(out)), load_policy(policy)).to_dict()["calls"]
        bl = tmp_path / f"{fmt}-baseline.json"
        assert cli("check", path, "--baseline", bl, "--update-baseline", "-q").exit_code == 0
        assert cli("check", path, "--baseline", bl).exit_code == 0
        checked += 1
    assert checked == 2


def test_mini_swe_agent_usage_calibration_and_end(shared_transcripts, cli):
    path = shared_transcripts / "openai" / MINI
    t = load_transcript(str(path))
    assert t.model == "deepseek-chat" and len(t.usage) == 138
    cal = calibrate(t)
    assert cal.mape <= 0.10 and cal.calls == 138
    info = json.loads(cli("inspect", path, "--format", "json").stdout)
    assert info["calibration"] == cal.to_dict()
    assert info["unanswered_at_end"] == ["call_00_md4G3W1UxA33unq1rUjbrcxu"]  # the submit never came back
    assert info["violations"] == [] and [r["role"] for r in info["other_roles"]] == ["exit"]
    s = replay(t, load_policy("none")).summary
    assert s.recorded_input_cost_usd > 0 and s.price_model == "deepseek-chat"


def test_swe_agent_reused_ids_are_reported(shared_transcripts, cli):
    path = shared_transcripts / "openai" / SWE
    info = json.loads(cli("inspect", path, "--format", "json").stdout)
    dups = [(v["kind"], v["tool_use_id"]) for v in info["violations"]]
    assert dups == [("duplicate_tool_use_id", "call_5iDdbOYybq7L19vqXmR0DPaU"),
                    ("duplicate_tool_use_id", "call_ahToD2vM0aQWJPkRmy5cumru"),
                    ("duplicate_tool_use_id", "call_5iDdbOYybq7L19vqXmR0DPaU"),
                    ("duplicate_tool_use_id", "call_5iDdbOYybq7L19vqXmR0DPaU")]
    s = replay(load_transcript(str(path)), load_policy("s08")).summary
    assert s.violations_introduced == 0 and s.violations_inherited == 4


@pytest.mark.parametrize("name", ["replay", "gpt-4o"])
def test_a_swe_agent_run_replayed_by_its_replay_model_names_no_model(tmp_path, cli, name):
    """SWE-agent's ``replay`` model replays a recorded trajectory: it is no model of any provider. The
    trajectory names no model, so it is unpriced and says why (it read as a model called 'replay')."""
    from compactlab.transcripts.model import NO_MODEL

    doc = {"history": [{"role": "system", "content": "you fix bugs"}, {"role": "user", "content": "fix it"},
                       {"role": "assistant", "content": "done"}],
           "trajectory": [], "info": {},
           "replay_config": json.dumps({"agent": {"model": {"name": name}}})}
    path = tmp_path / "run.traj"
    path.write_text(json.dumps(doc))
    t = load_transcript(str(path))
    if name == "replay":
        assert t.model == NO_MODEL and any("SWE-agent's replay model" in w for w in t.warnings)
        r = cli("replay", path, "-p", "none", "--dry-run")
        assert r.exit_code == 0 and "a recording names no model: its calls are unpriced" in r.stderr, r.stderr
        assert "'(no model recorded)'" not in r.stderr
        assert r.stderr.count("unpriced") == 1  # (the loader says why, the price lookup what it costs: once)
    else:
        assert t.model == "gpt-4o" and not t.warnings

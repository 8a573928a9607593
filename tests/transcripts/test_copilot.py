"""Copilot CLI sessions (#61): events into calls and tool results, the model as the session names
it, usage as the session records it (totals only: no call's prompt is recorded), and a compaction."""

from __future__ import annotations

import json
from pathlib import Path

from compactlab import load_policy, load_transcript, replay
from compactlab.transcripts import detect_format

DATA = Path(__file__).parent / "data" / "copilot"


def test_the_public_fixture_loads_with_its_session_totals():
    path = str(DATA / "splitrail-events.jsonl")
    assert detect_format(path) == "copilot"
    t = load_transcript(path)
    assert t.session_id == "cli-session-usage" and len(t.call_positions) == 2
    assert t.usage == {}  # (no call's prompt is recorded: every call is estimated, and said so)
    assert t.metadata["recorded_output_tokens"] == [32700, 8700]
    assert t.metadata["session_totals"]["gpt-5.4"] == {"inputTokens": 4_700_000, "cacheReadTokens": 4_600_000,
                                                      "cacheWriteTokens": 0, "outputTokens": 32_700}
    assert t.model == "claude-sonnet-4.5"  # (the latest model_change, its provider prefix dropped)
    assert [b["name"] for e in t.entries for b in e.message["content"] if b.get("type") == "tool_use"] == ["read_file",
                                                                                                          "bash"]
    assert replay(t, load_policy("none")).summary.violations == []


def test_a_built_session_keeps_its_failed_tool_and_its_compaction(cli):
    t = load_transcript(str(DATA / "built-compaction.jsonl"))
    assert [e.role for e in t.entries] == ["user", "assistant", "user", "assistant"]
    results = t.entries[2].message["content"]
    assert results[1] == {"type": "tool_result", "tool_use_id": "t2", "content": "file too large", "is_error": True}
    assert "The sleep" not in json.dumps([e.message for e in t.entries])  # (a streaming delta is no message)
    [c] = t.compactions
    assert c.position == 3 and c.time == "2026-11-22T08:00:12.000Z" and "wait_for_drain" in str(c.summary.message)
    run = replay(t, load_policy("none"), keep_recorded_compactions=True)
    assert run.summary.violations_introduced == 0 and run.calls[1].messages == 1
    info = json.loads(cli("inspect", DATA / "splitrail-events.jsonl", "--format", "json").stdout)
    assert info["calls_usage"].startswith("estimated") and info["session_totals"]


def test_a_copilot_home_is_found(tmp_path):
    from compactlab.transcripts.homes import find

    home = tmp_path / "home"
    folder = home / ".copilot" / "session-state" / "3f9c2a10"
    folder.mkdir(parents=True)
    (folder / "events.jsonl").write_bytes((DATA / "built-compaction.jsonl").read_bytes())
    [found] = [h for h in find(env={"HOME": str(home)}) if h.harness == "copilot"]
    assert [Path(p).parent.name for p in found.kept] == ["3f9c2a10"]
    assert find(env={"HOME": str(home)}, harness="copilot", project="svc")[0].kept

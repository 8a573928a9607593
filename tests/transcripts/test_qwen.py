"""Qwen Code chat recordings (#61): Gemini parts in a Claude-Code-like chain of records, per-call
usageMetadata, and a chat_compression Qwen Code recorded."""

from __future__ import annotations

import json
from pathlib import Path

from compactlab import load_policy, load_transcript, replay
from compactlab.transcripts import detect_format

DATA = Path(__file__).parent / "data" / "qwen"


def test_the_public_fixture_loads_with_its_recorded_usage():
    """splitrail's fixture (public, MIT; real Qwen Code 0.18.1 output): two calls, a failed tool call."""
    path = str(DATA / "splitrail-qwen_code.jsonl")
    assert detect_format(path) == "qwen"  # (not claude-code, whose envelope it shares)
    t = load_transcript(path)
    assert t.format == "qwen" and t.metadata["version"] == "0.18.1" and len(t.call_positions) == 2
    first, second = (t.usage[p] for p in t.call_positions)
    assert (first["input_tokens"], first["cache_read_input_tokens"], first["output_tokens"]) == (500, 0, 20)
    assert (second["input_tokens"], second["cache_read_input_tokens"], second["output_tokens"]) == (550, 50, 5)
    assert first["model"] == "coder-model"
    [result] = t.entries[2].message["content"]
    assert result == {"type": "tool_result", "tool_use_id": "call_1", "content": "Path must be absolute: .",
                      "is_error": True}
    assert replay(t, load_policy("none")).summary.violations == []


def test_a_built_recording_follows_its_chain_and_keeps_its_compression():
    """Built from Qwen Code's ChatRecord (not a real recording): a rewound record and a subagent's
    line are left out, thinking parts are thinking, and the compression is recorded."""
    t = load_transcript(str(DATA / "built-compression.jsonl"))
    assert (t.metadata["off_chain_records"], t.metadata["sidechain_records"]) == (1, 1)
    assert "(rewound)" not in json.dumps([e.message for e in t.entries])
    assert len(t.call_positions) == 4
    assert t.entries[1].message["content"][0]["type"] == "thinking"
    assert [b["tool_use_id"] for b in t.entries[4].message["content"]] == ["call_b", "call_c"]
    usage = t.usage[t.call_positions[0]]
    assert usage["output_tokens"] == 70  # (40 candidates + 30 thoughts: thinking is billed as output)
    [c] = t.compactions
    assert c.pre_tokens == 13_100 and c.position == 5 and "state_snapshot" in str(c.summary.message["content"])
    run = replay(t, load_policy("none"), keep_recorded_compactions=True)
    assert run.summary.violations_introduced == 0 and run.calls[2].messages == 2  # (the snapshot, then "Fix it.")


def test_a_qwen_home_is_found_and_its_compression_audited(cli, tmp_path):
    from compactlab.transcripts.homes import find

    home = tmp_path / "home"
    chats = home / ".qwen" / "projects" / "-home-u-app" / "chats"
    chats.mkdir(parents=True)
    (chats / "4b2d8f1e.jsonl").write_bytes((DATA / "built-compression.jsonl").read_bytes())
    [found] = [h for h in find(env={"HOME": str(home)}) if h.harness == "qwen"]
    assert [Path(p).name for p in found.kept] == ["4b2d8f1e.jsonl"]
    doc = json.loads(cli("inspect", "--compactions", chats / "4b2d8f1e.jsonl", "--format", "json").stdout)
    [row] = doc["sessions"][0]["compactions"]
    assert row["tokens_before"] == 13_100 and row["tokens_after"] == 2400


def test_the_window_is_the_one_qwen_code_recorded():
    from compactlab.engine.window import resolve

    t = load_transcript(str(DATA / "built-compression.jsonl"))
    w = resolve(fmt=t.format, model=t.model, metadata=t.metadata, usage=t.usage.values(), compactions=t.compactions)
    assert (w.tokens, w.source) == (1_000_000, "the recording's model_context_window")


def test_the_qwen_code_preset_fires_where_the_recording_compressed():
    """The preset's rule (70% of the limit on the last recorded prompt, the newest 30% kept), at
    the built recording's scale: with the trigger at 70% of a window whose 70% the recorded prompt
    (12,500 + 60 after call 2) passes, it compresses before the call Qwen Code recorded after its
    compression."""
    from bisect import bisect_left

    p = load_policy("qwen-code")
    assert (p.summary.trigger, p.summary.keep_tail_fraction, p.summary.measure) == (140_000, 0.3, "recorded")
    t = load_transcript(str(DATA / "built-compression.jsonl"))
    run = replay(t, load_policy("qwen-code", ["summary.trigger=12000"]))
    fired = [e.call for e in run.events if "summary" in e.layers]
    assert fired[:1] == [bisect_left(t.call_positions, t.compactions[0].position)], fired

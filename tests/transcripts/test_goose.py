"""Goose sessions (#61): its SQLite store read read-only, content_json blocks into calls and tool
results, the usage ledger's requests as the calls' usage, and the summary only the agent saw as a
recorded compaction.

The store is built (not a real recording) with the tables and columns third-party readers query
(agentsview's goose.go: sessions, messages, usage_ledger)."""

from __future__ import annotations

from pathlib import Path

from compactlab import load_policy, load_transcript, replay
from compactlab.transcripts import expand_inputs
from helpers import SAMPLES, goose_store as build


def test_a_goose_store_stands_for_its_sessions_and_a_session_reads_whole(tmp_path):
    store = build(tmp_path / "sessions.db")
    assert expand_inputs([str(store)]) == [f"{store}#20251122_1"]  # (the sub-agent's session: a subagent's)
    t = load_transcript(f"{store}#20251122_1")
    assert t.format == "goose" and t.model == "claude-sonnet-4-5" and t.metadata["cwd"] == "/home/u/api"
    assert [e.role for e in t.entries] == ["user", "assistant", "user", "assistant", "user", "user", "assistant"]
    assert t.entries[2].message["content"] == [{"type": "tool_result", "tool_use_id": "call_1",
                                                "content": "KeyError: 'DATABASE_URL'"}]
    assert t.entries[4].message["content"][0]["is_error"] is True
    first, second, third = (t.usage[p] for p in t.call_positions)  # (the ledger's requests but the compaction's)
    assert (first["input_tokens"], first["cache_creation_input_tokens"], first["output_tokens"]) == (3000, 2900, 40)
    assert (second["cache_read_input_tokens"], third["cache_creation_input_tokens"]) == (2900, 850)
    [c] = t.compactions
    assert c.position == 5 and "DATABASE_URL" in str(c.summary.message["content"])
    assert t.metadata["compaction_requests"] == 1
    run = replay(t, load_policy("none"), keep_recorded_compactions=True)
    assert run.summary.violations_introduced == 0 and run.calls[2].messages == 2


def test_a_store_given_says_the_subagent_sessions_it_left_out_are_a_stores(cli, tmp_path):
    store = build(tmp_path / "sessions.db")
    r = cli("replay", store, "--dry-run")
    assert r.exit_code == 0 and "left out 1 subagent session(s) of the store(s)," in r.stderr, r.stderr
    folder = tmp_path / "f"
    folder.mkdir()
    (folder / "s.jsonl").write_bytes((SAMPLES / "synth-small.jsonl").read_bytes())
    r = cli("replay", store, folder, "--dry-run")
    assert "left out 1 subagent session(s) of the folder(s) and store(s)," in r.stderr, r.stderr


def test_a_goose_home_is_found(tmp_path):
    from compactlab.transcripts.homes import find

    home = tmp_path / "home"
    (home / ".local" / "share" / "goose" / "sessions").mkdir(parents=True)
    build(home / ".local" / "share" / "goose" / "sessions" / "sessions.db")
    [found] = [h for h in find(env={"HOME": str(home)}) if h.harness == "goose"]
    assert [Path(p).name for p in found.kept] == ["sessions.db#20251122_1"]
    assert [Path(p).name for p in found.agents] == ["sessions.db#20251122_2"]

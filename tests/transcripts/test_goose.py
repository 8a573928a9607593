"""Goose sessions (#61): its SQLite store read read-only, content_json blocks into calls and tool
results, the usage ledger's requests as the calls' usage, and the summary only the agent saw as a
recorded compaction.

The store is built (not a real recording) with the tables and columns third-party readers query
(agentsview's goose.go: sessions, messages, usage_ledger)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from compactlab import load_policy, load_transcript, replay
from compactlab.transcripts import expand_inputs

SCHEMA = """
CREATE TABLE schema_version (version INTEGER);
CREATE TABLE sessions (id TEXT PRIMARY KEY, name TEXT, description TEXT, session_type TEXT, working_dir TEXT,
                       created_at TEXT, updated_at TEXT, provider_name TEXT, model_config_json TEXT,
                       parent_session_id TEXT, accumulated_input_tokens INTEGER, accumulated_output_tokens INTEGER);
CREATE TABLE messages (id INTEGER PRIMARY KEY, message_id TEXT, session_id TEXT, role TEXT, content_json TEXT,
                       created_timestamp INTEGER, timestamp TEXT, tokens INTEGER, metadata_json TEXT);
CREATE TABLE usage_ledger (id INTEGER PRIMARY KEY, session_id TEXT, created_timestamp INTEGER, model TEXT,
                           input_tokens INTEGER, output_tokens INTEGER, total_tokens INTEGER, cache_read_tokens INTEGER,
                           cache_write_tokens INTEGER, cost REAL, cost_source TEXT, is_compaction INTEGER);
"""


def build(path: Path) -> Path:
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode = wal")
    db.executescript(SCHEMA)
    db.execute("INSERT INTO schema_version VALUES (6)")
    db.execute("INSERT INTO sessions VALUES ('20251122_1', 'fix', '', 'user', '/home/u/api', '2025-11-22 08:00:00', "
               "'2025-11-22 08:10:00', 'anthropic', ?, NULL, 0, 0)", (json.dumps({"model_name": "claude-sonnet-4-5"}),))
    db.execute("INSERT INTO sessions VALUES ('20251122_2', 'sub', '', 'sub_agent', '/home/u/api', '2025-11-22 08:01:00', "
               "'2025-11-22 08:02:00', 'anthropic', '{}', '20251122_1', 0, 0)")
    user, agent_only = json.dumps({"userVisible": True, "agentVisible": True}), \
        json.dumps({"userVisible": False, "agentVisible": True})
    rows = [
        ("user", [{"type": "text", "text": "Why does /health return 500?"}], user),
        ("assistant", [{"type": "text", "text": "Checking."},
                       {"type": "toolRequest", "id": "call_1", "toolCall": {"status": "success", "value": {
                           "name": "developer__shell", "arguments": {"command": "curl -s localhost:8080/health"}}}}], user),
        ("user", [{"type": "toolResponse", "id": "call_1", "toolResult": {"status": "success", "value": {
            "content": [{"type": "text", "text": "KeyError: 'DATABASE_URL'"}]}}}], user),
        ("assistant", [{"type": "toolRequest", "id": "call_2", "toolCall": {"status": "success", "value": {
            "name": "developer__text_editor", "arguments": {"path": "/home/u/api/.env", "command": "view"}}}}], user),
        ("user", [{"type": "toolResponse", "id": "call_2", "toolResult": {"status": "error", "error": "no such file"}}], user),
        ("user", [{"type": "text", "text": "Summary: /health fails on a missing DATABASE_URL; .env is absent."}], agent_only),
        ("user", [{"type": "text", "text": "Add a default."}], user),
        ("assistant", [{"type": "thinking", "thinking": "set a sqlite default"},
                       {"type": "text", "text": "DATABASE_URL now defaults to sqlite:///app.db."}], user),
    ]
    for k, (role, content, meta) in enumerate(rows):
        db.execute("INSERT INTO messages VALUES (?, ?, '20251122_1', ?, ?, ?, '', 0, ?)",
                   (k + 1, f"m{k}", role, json.dumps(content), 1763798400 + k, meta))
    ledger = [(1763798401, 3000, 40, 0, 2900, 0), (1763798403, 20, 35, 2900, 150, 0), (1763798405, 3200, 300, 0, 0, 1),
              (1763798407, 900, 25, 0, 850, 0)]
    for k, (at, inp, out, read, write, compaction) in enumerate(ledger):
        db.execute("INSERT INTO usage_ledger VALUES (?, '20251122_1', ?, 'claude-sonnet-4-5', ?, ?, 0, ?, ?, NULL, "
                   "'estimated', ?)", (k + 1, at, inp, out, read, write, compaction))
    db.commit()
    db.close()
    return path


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


def test_a_goose_home_is_found(tmp_path):
    from compactlab.transcripts.homes import find

    home = tmp_path / "home"
    (home / ".local" / "share" / "goose" / "sessions").mkdir(parents=True)
    build(home / ".local" / "share" / "goose" / "sessions" / "sessions.db")
    [found] = [h for h in find(env={"HOME": str(home)}) if h.harness == "goose"]
    assert [Path(p).name for p in found.kept] == ["sessions.db#20251122_1"]
    assert [Path(p).name for p in found.agents] == ["sessions.db#20251122_2"]

"""OpenCode and Kilo CLI sessions (#61): a store's sessions read read-only from one snapshot, each
step of an assistant message a call with its step-finish usage, tool parts paired with their
outputs, and a compaction OpenCode recorded (its compaction part and summary message).

The stores here are built (not real recordings) with OpenCode's schema: its tables session,
message(id, session_id, time_created, data) and part(id, message_id, session_id, data), as its
migrations create them and as third-party readers (ccusage, splitrail, agentsview) query them."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from compactlab import load_policy, load_transcript, replay
from compactlab.errors import CompactlabError
from compactlab.transcripts import expand_inputs

SCHEMA = """
CREATE TABLE project (id text PRIMARY KEY, worktree text NOT NULL, time_created integer NOT NULL,
                      time_updated integer NOT NULL, sandboxes text NOT NULL);
CREATE TABLE session (id text PRIMARY KEY, project_id text NOT NULL, parent_id text, slug text NOT NULL,
                      directory text NOT NULL, title text NOT NULL, version text NOT NULL,
                      time_created integer NOT NULL, time_updated integer NOT NULL);
CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL, time_created integer NOT NULL,
                      time_updated integer NOT NULL, data text NOT NULL);
CREATE TABLE part (id text PRIMARY KEY, message_id text NOT NULL, session_id text NOT NULL,
                   time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
"""
T0 = 1_763_700_000_000  # (2025-11-21, epoch ms)


def tokens(inp, out, read=0, write=0, reasoning=0):
    return {"input": inp, "output": out, "reasoning": reasoning, "cache": {"read": read, "write": write}}


def session_rows():
    """One session: a prompt; a message of two steps (a tool call each); a pruned output; an
    automatic compaction (its request and summary); a prompt and an answer after it."""
    m = []  # (id, data, parts)
    m.append(("msg_01", {"role": "user", "time": {"created": T0}}, [
        {"type": "text", "text": "Why does test_parse fail?"},
        {"type": "text", "text": "Called the Read tool: tests/test_parse.py", "synthetic": True},
        {"type": "text", "text": "(hidden)", "ignored": True}]))
    m.append(("msg_02", {"role": "assistant", "time": {"created": T0 + 1000}, "modelID": "claude-sonnet-4-5",
                         "providerID": "anthropic", "tokens": tokens(10, 80, 5000, 300)}, [
        {"type": "step-start"},
        {"type": "reasoning", "text": "run the test first"},
        {"type": "tool", "callID": "toolu_1", "tool": "bash", "state": {
            "status": "completed", "input": {"command": "pytest tests/test_parse.py"},
            "output": "E   KeyError: 'delimiter_char'", "time": {"start": T0, "end": T0 + 1, "compacted": T0 + 9000}}},
        {"type": "step-finish", "tokens": tokens(4000, 60, 0, 3900)},
        {"type": "step-start"},
        {"type": "tool", "callID": "toolu_2", "tool": "read", "state": {
            "status": "error", "input": {"filePath": "src/parse.py"}, "error": "File not found"}},
        {"type": "step-finish", "tokens": tokens(10, 80, 5000, 300)}]))
    m.append(("msg_03", {"role": "user", "time": {"created": T0 + 2000}}, [{"type": "compaction", "auto": True}]))
    m.append(("msg_04", {"role": "assistant", "time": {"created": T0 + 3000}, "modelID": "claude-sonnet-4-5",
                         "summary": True, "mode": "compaction", "tokens": tokens(5400, 200)}, [
        {"type": "text", "text": "Summary: test_parse fails with KeyError delimiter_char; src/parse.py is missing."}]))
    m.append(("msg_05", {"role": "user", "time": {"created": T0 + 4000}}, [{"type": "text", "text": "Fix it."}]))
    m.append(("msg_06", {"role": "assistant", "time": {"created": T0 + 5000}, "modelID": "claude-sonnet-4-5",
                         "tokens": tokens(20, 30, 0, 400)}, [{"type": "text", "text": "Renamed delimiter_char."}]))
    return m


def build_store(path: Path, journal: str = "wal") -> Path:
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA journal_mode = {journal}")
    db.executescript(SCHEMA)
    db.execute("INSERT INTO project VALUES ('prj_1', '/home/u/parser', ?, ?, '[]')", (T0, T0))
    db.execute("INSERT INTO session VALUES ('ses_main', 'prj_1', NULL, 'main', '/home/u/parser', 'why', '1.0.120', ?, ?)",
               (T0, T0 + 5000))
    db.execute("INSERT INTO session VALUES ('ses_task', 'prj_1', 'ses_main', 'task', '/home/u/parser', 'task', "
               "'1.0.120', ?, ?)", (T0 + 100, T0 + 200))
    for mid, data, parts in session_rows():
        db.execute("INSERT INTO message VALUES (?, 'ses_main', ?, ?, ?)", (mid, data["time"]["created"],
                                                                          data["time"]["created"], json.dumps(data)))
        for k, p in enumerate(parts):
            db.execute("INSERT INTO part VALUES (?, ?, 'ses_main', ?, ?, ?)",
                       (f"prt_{mid}_{k:02d}", mid, data["time"]["created"], data["time"]["created"], json.dumps(p)))
    db.execute("INSERT INTO message VALUES ('msg_t1', 'ses_task', ?, ?, ?)",
               (T0 + 150, T0 + 150, json.dumps({"role": "user", "time": {"created": T0 + 150}})))
    db.execute("INSERT INTO part VALUES ('prt_t1', 'msg_t1', 'ses_task', ?, ?, ?)",
               (T0 + 150, T0 + 150, json.dumps({"type": "text", "text": "subtask"})))
    db.commit()
    db.close()
    return path


def test_a_store_stands_for_its_sessions_and_a_session_is_read_from_it(tmp_path):
    store = build_store(tmp_path / "opencode.db")
    assert expand_inputs([str(store)]) == [f"{store}#ses_main"]  # (the task's sub-session: a subagent's)
    assert expand_inputs([str(store)], subagents=True) == [f"{store}#ses_main", f"{store}#ses_task"]
    t = load_transcript(f"{store}#ses_main")
    assert t.format == "opencode" and t.session_id == "ses_main" and t.metadata["version"] == "1.0.120"
    assert len(t.call_positions) == 3  # (two steps of one message, and the answer; the summary is no call)
    first, second, third = (t.usage[p] for p in t.call_positions)
    assert first == {"input_tokens": 4000, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 3900,
                     "output_tokens": 60, "model": "claude-sonnet-4-5", "timestamp": "2025-11-21T04:40:01Z"}
    assert (second["input_tokens"], second["cache_read_input_tokens"], second["output_tokens"]) == (10, 5000, 80)
    assert third["cache_creation_input_tokens"] == 400
    user = t.entries[0].message["content"][0]["text"]
    assert "Called the Read tool" in user and "(hidden)" not in user  # (synthetic text is sent; ignored is not)
    assert t.entries[1].message["content"][0]["type"] == "thinking"
    assert t.entries[2].message["content"] == [{"type": "tool_result", "tool_use_id": "toolu_1",
                                                "content": "E   KeyError: 'delimiter_char'"}]
    assert t.entries[4].message["content"][0]["is_error"] is True
    assert t.metadata["pruned_outputs"] == 1 and t.metadata["compaction_requests"] == 1
    [c] = t.compactions
    assert c.trigger == "auto" and c.position == 5 and "KeyError" in str(c.summary.message["content"])
    run = replay(t, load_policy("none"), keep_recorded_compactions=True)
    assert run.summary.violations_introduced == 0 and run.calls[2].messages == 2  # (the summary, then "Fix it.")
    assert t.content_hash == load_transcript(f"{store}#ses_main").content_hash  # (a session's own content)


def test_the_store_is_read_while_opencode_writes_it_or_refused_in_one_line(tmp_path, cli):
    store = build_store(tmp_path / "opencode.db")
    writer = sqlite3.connect(store)
    writer.execute("BEGIN IMMEDIATE")  # (OpenCode mid-write: in WAL mode a reader sees the last commit)
    writer.execute("UPDATE session SET title = 'changed' WHERE id = 'ses_main'")
    assert load_transcript(f"{store}#ses_main").metadata["title"] == "why"
    writer.rollback()
    writer.close()
    locked = build_store(tmp_path / "locked.db", journal="delete")
    holder = sqlite3.connect(locked)
    holder.execute("BEGIN EXCLUSIVE")  # (a rollback-journal store locked by its writer: never waited on)
    r = cli("inspect", f"{locked}#ses_main")
    holder.rollback()
    holder.close()
    assert r.exit_code != 0 and "cannot read now" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) <= 2
    other = tmp_path / "other.db"
    sqlite3.connect(other).executescript("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
    r = cli("inspect", f"{other}#ses_x")
    assert r.exit_code != 0 and "not a store of a harness compactlab reads" in r.stderr, r.stderr
    r = cli("inspect", f"{store}#ses_nope")
    assert r.exit_code != 0 and "no such session" in r.stderr, r.stderr


def test_inspect_lists_a_stores_sessions_and_audits_its_compaction(cli, tmp_path):
    store = build_store(tmp_path / "opencode.db")
    rows = json.loads(cli("inspect", store, "--format", "json").stdout)
    assert [Path(s["transcript"]).name for s in rows["sessions"]] == ["opencode.db#ses_main"]
    doc = json.loads(cli("inspect", "--compactions", f"{store}#ses_main", "--format", "json").stdout)
    [row] = doc["sessions"][0]["compactions"]
    assert row["trigger"] == "auto" and row["call"] == 2 and row["tokens_after"] == 420


def test_legacy_storage_files_read_as_the_store(tmp_path):
    storage = tmp_path / "storage"
    (storage / "session" / "prj_1").mkdir(parents=True)
    (storage / "session" / "prj_1" / "ses_main.json").write_text(json.dumps(
        {"id": "ses_main", "projectID": "prj_1", "directory": "/home/u/parser", "title": "why", "version": "0.3.0",
         "time": {"created": T0, "updated": T0 + 5000}}))
    for mid, data, parts in session_rows():
        (storage / "message" / "ses_main").mkdir(parents=True, exist_ok=True)
        (storage / "message" / "ses_main" / f"{mid}.json").write_text(json.dumps({"id": mid, "sessionID": "ses_main",
                                                                                  **data}))
        (storage / "part" / mid).mkdir(parents=True, exist_ok=True)
        for k, p in enumerate(parts):
            (storage / "part" / mid / f"prt_{mid}_{k:02d}.json").write_text(json.dumps({"id": f"prt_{mid}_{k:02d}", **p}))
    t = load_transcript(str(storage / "session" / "prj_1" / "ses_main.json"))
    store = load_transcript(f"{build_store(tmp_path / 'opencode.db')}#ses_main")
    assert t.format == "opencode" and t.messages == store.messages and t.usage == store.usage
    assert len(t.compactions) == 1
    # its hash is of every file it was read from: a part written since is another transcript (it was the
    # session file's alone: `check` and the probe cache took a continued session for the one they knew)
    part = sorted((storage / "part").rglob("*.json"))[-1]
    part.write_text(part.read_text().replace("}", ', "extra": 1}', 1))
    again = load_transcript(str(storage / "session" / "prj_1" / "ses_main.json"))
    assert again.content_hash != t.content_hash and again.messages == t.messages
    assert load_transcript(str(storage / "session" / "prj_1" / "ses_main.json")).content_hash == again.content_hash


def test_an_opencode_and_a_kilo_home_are_found(tmp_path):
    from compactlab.transcripts.homes import find

    home = tmp_path / "home"
    (home / ".local" / "share" / "opencode").mkdir(parents=True)
    (home / ".local" / "share" / "kilo").mkdir(parents=True)
    build_store(home / ".local" / "share" / "opencode" / "opencode.db")
    build_store(home / ".local" / "share" / "kilo" / "kilo.db")
    found = {h.harness: h for h in find(env={"HOME": str(home)})}
    assert [Path(p).name for p in found["opencode"].kept] == ["opencode.db#ses_main"]
    assert [Path(p).name for p in found["opencode"].agents] == ["opencode.db#ses_task"]
    assert [Path(p).name for p in found["kilo-cli"].kept] == ["kilo.db#ses_main"]
    assert found["opencode"].found == 1
    # --since by the store's own time of the session (2025-11-21), not the file's
    assert find(env={"HOME": str(home)}, harness="opencode", since=T0 / 1000 + 60)[0].kept == []
    assert find(env={"HOME": str(home)}, harness="opencode", project="parser")[0].kept


def test_a_store_path_alone_is_no_transcript(tmp_path):
    store = build_store(tmp_path / "opencode.db")
    with pytest.raises(CompactlabError, match="store of many sessions"):
        load_transcript(str(store))


def test_a_stores_session_is_replayed_compared_and_converted_like_a_file(cli, tmp_path):
    store = build_store(tmp_path / "opencode.db")
    r = cli("replay", f"{store}#ses_main", "-p", "s08", "--out", tmp_path / "r", "-q")
    assert r.exit_code == 0 and (tmp_path / "r" / "calls.csv").is_file(), r.stderr
    doc = json.loads(cli("compare", store, "-p", "opencode", "--out", tmp_path / "c", "-q", "--charts", "none",
                         "--format", "json").stdout)
    assert {e["policy"] for e in doc["verdict"]["entries"]} == {"opencode", "none"}
    assert cli("convert", f"{store}#ses_main", "-o", tmp_path / "s.jsonl", "-q").exit_code == 0
    converted = load_transcript(str(tmp_path / "s.jsonl"))
    assert converted.messages == load_transcript(f"{store}#ses_main").messages


def test_since_filters_a_stores_sessions_by_the_stores_own_time(cli, tmp_path):
    """--since with a store as the path: each session by the time the store gives it (2025-11-21
    here), never the file's; its task's sub-session is said left out."""
    store = build_store(tmp_path / "opencode.db")
    kept = cli("inspect", store, "--since", "2025-11-20", "--format", "json")
    assert kept.exit_code == 0, kept.stderr
    assert [Path(s["transcript"]).name for s in json.loads(kept.stdout)["sessions"]] == ["opencode.db#ses_main"]
    assert "left out 1 subagent session(s)" in kept.stderr
    none = cli("inspect", store, "--since", "2025-11-22")
    assert none.exit_code != 0 and "Traceback" not in none.stderr and "--since" in none.stderr, none.stderr

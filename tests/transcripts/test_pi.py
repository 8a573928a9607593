"""Pi (and OpenClaw) sessions (#61): the path the agent took through the session's tree, tool calls
and results paired, per-call usage with the cache split, and a compaction Pi recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from compactlab import load_policy, load_transcript, replay
from compactlab.transcripts import detect_format

DATA = Path(__file__).parent / "data" / "pi"


def test_the_public_fixture_loads_with_its_recorded_usage():
    """splitrail's fixture (public, MIT): two calls, their usage as Pi recorded it."""
    t = load_transcript(str(DATA / "splitrail-session.jsonl"))
    assert t.format == "pi" and detect_format(str(DATA / "splitrail-session.jsonl")) == "pi"
    assert len(t.call_positions) == 2
    first, second = (t.usage[p] for p in t.call_positions)
    assert first == {"input_tokens": 100, "cache_read_input_tokens": 20, "cache_creation_input_tokens": 10,
                     "output_tokens": 50, "model": "claude-sonnet-4-5", "timestamp": "2025-01-15T10:00:02.000Z"}
    assert second["model"] == "gpt-4o" and second["input_tokens"] == 60
    tools = [b["name"] for b in t.entries[-1].message["content"] if b.get("type") == "tool_use"]
    assert tools == ["Read", "Bash"]
    assert t.metadata["harness_cost_usd"] == pytest.approx(0.0031075)


def test_a_built_session_follows_its_last_branch_and_keeps_its_compaction():
    """Built from the format (not a real recording): the abandoned branch is left out, the results
    of a call gathered after it, and the compaction restarts from its summary and the entries from
    firstKeptEntryId on."""
    t = load_transcript(str(DATA / "built-tree-compaction.jsonl"))
    assert t.format == "pi" and t.metadata["other_branch_entries"] == 1
    texts = " ".join(str(e.message["content"]) for e in t.entries)
    assert "(abandoned)" not in texts and "Tried renaming everything" in texts  # (the branch summary is on the path)
    assert len(t.call_positions) == 5
    roles = [e.role for e in t.entries]
    assert roles == ["user", "assistant", "user", "assistant", "user", "user", "assistant", "user", "user",
                     "assistant", "user", "assistant"]
    results = t.entries[4].message["content"]
    assert [b["tool_use_id"] for b in results] == ["c2", "c3"]  # (two results, one user message)
    [c] = t.compactions
    assert c.pre_tokens == 3800 and c.time == "2026-11-20T10:11:00.000Z" and c.trigger is None
    assert list(c.kept) == [6, 7] and c.position == 8  # (a3 and its result: from firstKeptEntryId on)
    assert "frob_state_t" in str(c.summary.message["content"])
    run = replay(t, load_policy("none"), keep_recorded_compactions=True)
    assert run.summary.violations_introduced == 0
    after = run.calls[3]  # (the first call after the compaction: summary, the kept two, the new prompt)
    assert after.messages == 4, after
    usage = t.usage[t.call_positions[0]]
    assert (usage["input_tokens"], usage["cache_creation_input_tokens"], usage["output_tokens"]) == (3000, 2800, 40)


def test_a_pi_home_is_found_with_its_sessions(cli, tmp_path):
    home = tmp_path / "home"
    folder = home / ".pi" / "agent" / "sessions" / "--home-u-proj--"
    folder.mkdir(parents=True)
    (folder / "2026-11-20T10-00-00-000Z_8c1f0b7e.jsonl").write_bytes((DATA / "built-tree-compaction.jsonl").read_bytes())
    claw = home / ".openclaw" / "agents" / "main" / "sessions"
    claw.mkdir(parents=True)
    (claw / "s1.jsonl").write_bytes((DATA / "splitrail-session.jsonl").read_bytes())
    from compactlab.transcripts.homes import find

    found = {h.harness: h for h in find(env={"HOME": str(home)})}
    assert [Path(p).name for p in found["pi"].kept] == ["2026-11-20T10-00-00-000Z_8c1f0b7e.jsonl"]
    assert [Path(p).name for p in found["openclaw"].kept] == ["s1.jsonl"]
    assert [Path(p).name for p in find(env={"HOME": str(home)}, harness="openclaw")[0].kept] == ["s1.jsonl"]
    assert find(env={"HOME": str(home)}, project="home-u-proj")[0].harness == "pi"


def test_inspect_compactions_lists_pis(cli):
    import json

    doc = json.loads(cli("inspect", "--compactions", DATA / "built-tree-compaction.jsonl", "--format", "json").stdout)
    [row] = doc["sessions"][0]["compactions"]
    assert row["tokens_before"] == 3800 and row["tokens_before_source"] == "recorded by the harness"
    assert row["call"] == 3 and row["threshold"] == 183_616  # (Pi's rule: the window less reserveTokens' 16,384)
    assert row["fired"] == ("at 3,800, before 183,616: a /compact you typed, or a setting other than the one given "
                            "(the recording does not say which)")


@pytest.mark.parametrize("fmt", ["table", "md", "json"])
def test_inspect_compactions_of_a_pi_session_never_names_its_file_format_as_pis_version(cli, fmt):
    """A Pi session's header ``version`` is its file format's (3), not Pi's: kept as
    ``session_version``; the audit names no version (its table added the number to a text: an
    internal error)."""
    t = load_transcript(str(DATA / "built-tree-compaction.jsonl"))
    assert t.metadata["session_version"] == 3 and "version" not in t.metadata
    r = cli("inspect", "--compactions", DATA / "built-tree-compaction.jsonl", "--format", fmt)
    assert r.exit_code == 0, r.stderr
    if fmt == "json":
        import json

        assert json.loads(r.stdout)["sessions"][0]["version"] is None
    else:
        assert "built-tree-compaction.jsonl (pi): window" in r.stdout, r.stdout


def test_inspect_with_no_path_finds_the_pi_and_qwen_sessions_of_a_home(cli, tmp_path, monkeypatch):
    home = tmp_path / "home"
    pi = home / ".pi" / "agent" / "sessions" / "--home-u-proj--"
    pi.mkdir(parents=True)
    (pi / "a.jsonl").write_bytes((DATA / "built-tree-compaction.jsonl").read_bytes())
    qwen = home / ".qwen" / "projects" / "-home-u-app" / "chats"
    qwen.mkdir(parents=True)
    (qwen / "b.jsonl").write_bytes((DATA.parent / "qwen" / "built-compression.jsonl").read_bytes())
    monkeypatch.setenv("HOME", str(home))
    r = cli("inspect", "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert "~/.pi/agent/sessions (pi): 1" in r.stderr and "~/.qwen/projects (qwen): 1" in r.stderr, r.stderr
    import json

    doc = json.loads(r.stdout)
    formats = sorted(s["format"] for s in doc["sessions"]) if "sessions" in doc else None
    assert formats == ["pi", "qwen"], doc.keys()


def test_the_pi_preset_measures_the_context_as_pi_does():
    """Pi's defaults (DEFAULT_COMPACTION_SETTINGS: reserveTokens 16,384, keepRecentTokens 20,000)
    and its trigger measured as shouldCompact measures it (the last call's recorded usage): with
    the window lowered to the built session's size, the preset fires before the call where Pi
    recorded its compaction (the session's 3,730 tokens after call 2 pass 3,700)."""
    p = load_policy("pi")
    assert (p.summary.trigger, p.summary.measure, p.summary.keep_tail_fraction) == (200_000 - 16_384, "recorded", 0.11)
    t = load_transcript(str(DATA / "built-tree-compaction.jsonl"))
    run = replay(t, load_policy("pi", ["summary.trigger=3700"]))
    fired = [e.call for e in run.events if "summary" in e.layers]
    from bisect import bisect_left

    assert fired[:1] == [bisect_left(t.call_positions, t.compactions[0].position)], fired


def test_the_recorded_cost_is_the_recorded_usage_at_the_published_prices():
    """The public fixture's recorded tokens priced by hand (claude-sonnet-4-5: $3 input, $0.30 cache
    read, $3.75 cache write, $15 output per MTok; gpt-4o: $2.50 input, $10 output) equal
    compactlab's recorded cost of the session."""
    from compactlab.engine.cost.pricing import recorded_total

    t = load_transcript(str(DATA / "splitrail-session.jsonl"))
    by_hand = (100 * 3 + 20 * 0.30 + 10 * 3.75 + 50 * 15 + 60 * 2.50 + 30 * 10) / 1e6
    assert recorded_total(t) == pytest.approx(by_hand, abs=1e-12)

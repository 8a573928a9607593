"""Claude Code session logs: hand-made fixtures, one per rule, and every real shared session."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from compactlab import load_policy, load_transcript, replay
from compactlab.corpus.calibration import calibrate
from compactlab.transcripts.claude_code import already_compacted, subagent_files
from helpers import ClaudeCodeSession as Session

SESSION = "4d5611e5-241a-462a-8d15-5122611a9569"


def tool(tid: str, name: str = "Bash") -> dict:
    return {"type": "tool_use", "id": tid, "name": name, "input": {"command": "ls"}}


def text(t: str) -> dict:
    return {"type": "text", "text": t}


def test_interleaved_parallel_calls_are_regrouped(tmp_path):
    # A(X, tool 1) A(X, tool 2) U(result 1) A(X, tool 3) U(result 2) U(result 3): one call
    s = (Session().user("go")
         .assistant("X", tool("t1")).assistant("X", tool("t2")).result("t1")
         .assistant("X", tool("t3")).result("t2").result("t3")
         .assistant("Y", text("done"), output_tokens=40))
    t = load_transcript(s.write(tmp_path / "s.jsonl"))
    assert t.format == "claude-code"
    assert [m["role"] for m in t.messages] == ["user", "assistant", "user", "assistant"]
    assert [b["id"] for b in t.messages[1]["content"]] == ["t1", "t2", "t3"]
    assert [b["tool_use_id"] for b in t.messages[2]["content"]] == ["t1", "t2", "t3"]
    assert replay(t, load_policy("none")).summary.violations_inherited == 0


def test_naive_merging_would_invent_orphans_but_regrouping_does_not(tmp_path):
    s = Session().user("go").assistant("X", tool("a")).result("a").assistant("X", tool("b")).result("b").assistant("Y", text("ok"))
    t = load_transcript(s.write(tmp_path / "s.jsonl"))
    assert len(t.call_positions) == 2
    assert replay(t, load_policy("s08")).summary.violations == []


def test_duplicated_usage_record_keeps_the_last_line(tmp_path):
    s = (Session().user("go").assistant("X", text("thinking"), output_tokens=5)
         .assistant("X", tool("t1"), output_tokens=77).result("t1").assistant("Y", text("ok")))
    t = load_transcript(s.write(tmp_path / "s.jsonl"))
    assert t.usage[1] == {"input_tokens": 3, "cache_creation_input_tokens": 1000, "cache_read_input_tokens": 2000,
                          "output_tokens": 77, "model": "claude-opus-4-6",
                          "timestamp": "2026-01-01T00:00:00Z"}  # with the call's own model and time
    assert len(t.usage) == 2 and t.model == "claude-opus-4-6"


def test_unknown_line_types_are_ignored(tmp_path):
    s = (Session().line({"type": "hologram", "uuid": "h1", "sessionId": "s1", "data": [1, 2]})
         .user("go").line({"type": "progress", "uuid": "p", "sessionId": "s1", "data": {"type": "hook_progress"}})
         .assistant("X", text("ok")).line({"type": "ai-title", "title": "A title", "sessionId": "s1"}))
    t = load_transcript(s.write(tmp_path / "s.jsonl"))
    assert len(t.entries) == 2 and t.title == "A title"
    assert t.metadata["ignored_lines"]["unknown line type 'hologram'"] == 1


def test_a_line_cut_in_half(tmp_path):
    path = Path(Session().user("go").assistant("X", text("ok")).user("more").assistant("Y", text("ok")).write(tmp_path / "s.jsonl"))
    lines = path.read_bytes().split(b"\n")
    lines[3] = lines[3][: len(lines[3]) // 2]
    path.write_bytes(b"\n".join(lines))
    from compactlab.errors import BadLineError

    with pytest.raises(BadLineError, match=r":4: invalid JSON"):
        load_transcript(str(path))
    t = load_transcript(str(path), skip_bad_lines=True)
    assert t.skipped_lines == 1 and len(t.call_positions) == 2


def test_u2028_inside_a_string(tmp_path):
    s = Session().user("line one\u2028line two").assistant("X", text("a\u2029b"))
    t = load_transcript(s.write(tmp_path / "s.jsonl"))
    assert t.messages[0]["content"] == "line one\u2028line two" and len(t.entries) == 2


def test_compact_boundary_with_its_summary(tmp_path):
    s = (Session().user("go").assistant("X", tool("t1")).result("t1", "x" * 5000).assistant("Y", text("long work"))
         .line({"type": "system", "subtype": "compact_boundary", "parentUuid": None, "logicalParentUuid": "u4",
                "uuid": "b1", "sessionId": "s1", "compactMetadata": {"trigger": "auto", "preTokens": 170000}})
         .user("This session is being continued... summary", isCompactSummary=True, isVisibleInTranscriptOnly=True)
         .user("continue please").assistant("Z", text("ok")))
    t = load_transcript(s.write(tmp_path / "s.jsonl"))
    assert [m["content"] for m in t.messages if m["role"] == "user" and isinstance(m["content"], str)] == ["go", "continue please"]
    [c] = t.compactions
    assert (c.position, c.trigger, c.pre_tokens) == (4, "auto", 170000)
    default = replay(t, load_policy("none"))
    kept = replay(t, load_policy("none"), keep_recorded_compactions=True)
    assert default.calls[-1].messages == 5 and default.calls[-1].raw_messages == 5
    assert kept.calls[-1].messages == 2  # [recorded summary, "continue please"]
    assert kept.calls[-1].raw_chars == default.calls[-1].raw_chars  # the raw baseline is unchanged
    assert kept.summary.violations == []


def test_inline_sidechains_are_left_out_of_the_main_replay(tmp_path):
    s = Session().user("go").assistant("X", tool("task", "Task"))
    side = Session(sidechain=True)
    side.n = 100
    side.user("subagent prompt").assistant("S1", tool("inner")).result("inner").assistant("S2", text("sub done"))
    s.lines += side.lines[1:]
    s.result("task", "agent said done").assistant("Y", text("finished"))
    t = load_transcript(s.write(tmp_path / "s.jsonl"))
    assert len(t.call_positions) == 2 and t.metadata["sidechain_lines"] == 4
    assert replay(t, load_policy("s08")).summary.violations == []


def test_inline_sidechains_are_billed_and_counted_apart(tmp_path, cli):
    """(#43 §6) Claude Code 1.0.x wrote subagents inline: their calls are not replayed (another
    conversation) but were billed, as ccusage counts them: replay, inspect and a folder's totals
    say what they cost, apart from the session's own."""
    from compactlab.engine.cost.prices import load_prices

    s = Session().user("go").assistant("X", tool("task", "Task"))
    side = Session(sidechain=True)
    side.n = 100
    side.user("subagent prompt").assistant("S1", tool("inner"), input_tokens=40_000)
    side.assistant("S1", tool("inner2"), input_tokens=40_000)  # (a message's second line: the same call)
    side.result("inner").result("inner2").assistant("S2", text("sub done"), output_tokens=700)
    s.lines += side.lines[1:]
    s.result("task", "agent said done").assistant("Y", text("finished"))
    path = s.write(tmp_path / "s.jsonl")
    summary = replay(load_transcript(path), load_policy("none")).summary
    p = load_prices().lookup("claude-opus-4-6")
    one = {"cache_creation_input_tokens": 1000, "cache_read_input_tokens": 2000}
    expected = (p.recorded_input_cost({**one, "input_tokens": 40_000}) + p.recorded_output_cost({"output_tokens": 5})
                + p.recorded_input_cost({**one, "input_tokens": 3}) + p.recorded_output_cost({"output_tokens": 700}))
    assert summary.sidechain_calls == 2 and summary.recorded_sidechain_cost_usd == pytest.approx(expected, abs=1e-6)
    assert summary.calls == 2 and summary.recorded_cost_usd is not None
    r = cli("replay", path, "-p", "none", "--dry-run")
    assert f"2 call(s), ${expected:,.4f} with output" in r.stdout
    r = cli("inspect", path)
    assert "inline subagents (sidechain lines, not replayed)" in r.stdout and f"${expected:,.4f}" in r.stdout
    folder = tmp_path / "sessions"
    folder.mkdir()
    for name in ("a.jsonl", "b.jsonl"):
        (folder / name).write_bytes(Path(path).read_bytes())
    r = cli("replay", folder, "-p", "none", "--dry-run")
    assert f"+ ${2 * expected:,.4f} of inline subagents (2 recording(s))" in r.stdout


def test_convert_keeps_the_recorded_cost_of_inline_sidechains(tmp_path, cli):
    """(#55 §5) Converted, a 1.0.x session's inline subagents still cost what they cost ($2.39
    became $0.11: their usage was dropped); read as a stream or whole, the same."""
    s = Session().user("go").assistant("X", tool("task", "Task"))
    side = Session(sidechain=True)
    side.n = 100
    side.user("subagent prompt").assistant("S1", tool("inner"), input_tokens=40_000)
    side.result("inner").assistant("S2", text("sub done"), output_tokens=700)
    s.lines += side.lines[1:]
    s.result("task", "agent said done").assistant("Y", text("finished"))
    path = s.write(tmp_path / "s.jsonl")
    source = replay(load_transcript(path), load_policy("none")).summary
    out = tmp_path / "s.anthropic.jsonl"
    r = cli("convert", path, "-o", out)
    assert r.exit_code == 0, r.stderr
    converted = load_transcript(str(out))
    assert converted.metadata["sidechain_lines"] == 4 and len(converted.metadata["sidechain_usage"]) == 2
    summary = replay(converted, load_policy("none")).summary
    assert summary.sidechain_calls == source.sidechain_calls == 2
    assert summary.recorded_sidechain_cost_usd == source.recorded_sidechain_cost_usd > 0
    assert summary.recorded_cost_usd == source.recorded_cost_usd
    r = cli("inspect", out)
    assert f"${source.recorded_sidechain_cost_usd:,.4f}" in r.stdout, r.stdout


def test_sizes_come_from_message_content_only(tmp_path):
    s = Session().user("go").assistant("X", tool("t1")).result("t1", "small")
    t = load_transcript(s.write(tmp_path / "s.jsonl"))
    # toolUseResult holds 50x the output and progress/snapshot lines exist: none of it counts
    assert sum(e.chars for e in t.entries) == sum(len(orjson.dumps(m)) for m in t.messages)


def test_already_compacted_content_is_counted(tmp_path):
    s = (Session().user("go").assistant("X", tool("t1")).result("t1", "<persisted-output>\nFull output: /x\n</persisted-output>")
         .assistant("Y", tool("t2")).result("t2", "[Old tool result content cleared]").assistant("Z", text("ok")))
    t = load_transcript(s.write(tmp_path / "s.jsonl"))
    assert already_compacted(t) == {"persisted_output": 1, "cleared_tool_result": 1}


def test_detection_does_not_rely_on_line_one(tmp_path):
    s = Session()
    s.lines = [{"type": "summary", "summary": "Old title", "leafUuid": "x"}] * 3 + s.lines
    s.user("go").assistant("X", text("ok"))
    t = load_transcript(s.write(tmp_path / "s.jsonl"))
    assert t.format == "claude-code" and t.title == "Old title"


# -- the real sessions ------------------------------------------------------------------------------

def _real_files(root: Path) -> list[Path]:
    files = sorted(root.glob("claude_code/**/*.jsonl"))
    assert len(files) >= 5
    return files


def _distinct_main_ids(path: Path) -> int:
    ids = set()
    lines = [json.loads(line) for line in path.read_text().split("\n") if line.strip()]
    conv = [d for d in lines if d.get("type") in ("user", "assistant")]
    subagent = conv[0].get("isSidechain") is True
    for d in conv:
        if d["type"] == "assistant" and (subagent or not d.get("isSidechain")):
            ids.add(d["message"]["id"])
    return len(ids)


def test_every_real_session_replays_cleanly(shared_transcripts, cli, tmp_path):
    checked = 0
    for path in _real_files(shared_transcripts):
        t = load_transcript(str(path))
        assert t.format == "claude-code"
        assert len(t.call_positions) == _distinct_main_ids(path), path.name
        none = replay(t, load_policy("none"))
        assert none.summary.violations == [], path.name
        s08 = replay(t, load_policy("s08"))
        assert s08.summary.violations_introduced == 0, path.name
        for args in (("replay", path, "--dry-run", "-q"), ("inspect", path, "--format", "json")):
            assert cli(*args).exit_code == 0, (args, path.name)
        # convert round-trips: by default with the recorded compactions in their documented form,
        # with --drop-recorded-compactions the plain messages a replay uses (each as it is: two of a
        # role in a row stay two): the same records either way
        for keep in (False, True):
            out = tmp_path / f"{path.stem}-{keep}.jsonl"
            assert cli("convert", path, "-o", out, "-q", *([] if keep else ["--drop-recorded-compactions"])).exit_code == 0
            lines = [json.loads(line) for line in out.read_text().splitlines()]
            roles = [m["role"] for m in lines if m["role"] != "system" and "recorded_compaction" not in m]
            assert roles == [e.role for e in t.entries], path.name
            assert any("recorded_compaction" in m for m in lines) == (keep and bool(t.compactions)), path.name
            converted = load_transcript(str(out))
            assert converted.format == "anthropic"
            # (calibrated as the command line is where the compactions are kept; dropped, the usage after
            # the first goes too, and with it the fit: the policy's estimate on both)
            fitted = {} if keep else {"calibration": None}
            a = replay(t, load_policy("s08"), keep_recorded_compactions=keep, **fitted).to_dict()["calls"]
            b = replay(converted, load_policy("s08"), keep_recorded_compactions=keep, **fitted).to_dict()["calls"]
            if not keep:  # dropped, the usage after the first compaction goes, and with it the calls' times:
                cached = ("cache_read_tokens", "cache_write_tokens", "input_cost_usd")  # the cache cannot expire
                a, b = ([{k: v for k, v in c.items() if k not in cached} for c in x] for x in (a, b))
            assert a == b, path.name
        checked += 1
    assert checked == len(_real_files(shared_transcripts))


def test_calibration_on_the_long_session(shared_transcripts, cli):
    path = shared_transcripts / "claude_code" / "spotter" / f"{SESSION}.jsonl"
    cal = calibrate(load_transcript(str(path)))
    assert cal.calls == 139 and cal.mape <= 0.10
    assert 1.5 < cal.chars_per_token < 5 and cal.overhead_tokens > 0
    info = json.loads(cli("inspect", path, "--format", "json").stdout)
    assert info["calibration"] == cal.to_dict()
    assert len(info["recorded_calls"]) == 139 and info["recorded_calls"][0]["recorded_prompt_tokens"] > 0
    r = cli("replay", path, "--calibrate", "--dry-run", "--format", "json", "-p", "none", "--keep-recorded-compactions")
    calls = json.loads(r.stdout)["runs"][0]["calls"]
    recorded = [c["recorded_prompt_tokens"] for c in info["recorded_calls"]]
    err = sum(abs(c["tokens"] - y) / y for c, y in zip(calls, recorded)) / len(recorded)
    assert err <= 0.10 and "calibrated:" in r.stderr


def test_subagents_are_listed_and_acompact_flagged(shared_transcripts, cli):
    main = shared_transcripts / "claude_code" / "spotter" / f"{SESSION}.jsonl"
    subs = subagent_files(str(main))
    assert [(Path(s["path"]).name, s["acompact"]) for s in subs] == [
        ("agent-a2898e3.jsonl", False), ("agent-acompact-e1f845.jsonl", True)]
    info = json.loads(cli("inspect", main, "--format", "json").stdout)
    assert len(info["subagents"]) == 2
    acompact = load_transcript(subs[1]["path"])
    assert acompact.metadata["acompact"] and acompact.metadata["subagent"] and len(acompact.call_positions) == 1
    assert "calibration" not in json.loads(cli("inspect", subs[1]["path"], "--format", "json").stdout)
    r = cli("replay", subs[1]["path"], "--calibrate", "--dry-run")
    assert r.exit_code == 2 and "not self-contained" in r.stderr
    sub = load_transcript(subs[0]["path"])
    assert sub.metadata["subagent"] and not sub.metadata["acompact"] and len(sub.call_positions) == 12


def test_a_folder_of_sessions(shared_transcripts, cli):
    folder = shared_transcripts / "claude_code" / "spotter"
    info = json.loads(cli("inspect", folder, "--format", "json").stdout)
    assert [Path(r["transcript"]).name for r in info["sessions"]] == [f"{SESSION}.jsonl", "tool_heavy.jsonl"]
    assert info["sessions"][0]["compactions"] == 1 and info["sessions"][0]["recorded_tokens"] > 10_000_000
    runs = json.loads(cli("replay", folder, "--dry-run", "--format", "json").stdout)["runs"]
    assert [r["summary"]["calls"] for r in runs] == [139, 4]


def test_replay_of_converts_output_gives_the_sources_answer(shared_transcripts, cli, tmp_path):
    """(#27 §8) For every shared session: replay (calibrated, the default) of convert's output gives
    the calls, tokens and cost of replay of the source, recorded compactions included (a Gemini CLI
    recording whose replies follow one another had 3 calls fewer once they were merged into one)."""
    def figures(path):
        r = cli("replay", path, "-p", "none", "--dry-run", "--format", "json", "-q")
        assert r.exit_code == 0, r.output
        s = json.loads(r.stdout)["runs"][0]["summary"]
        return s["calls"], s["tokens_total"], s["cost_usd"], (s["window_tokens"], s["window_source"], s["billed_cost_usd"])

    checked = 0
    for folder in ("claude_code", "codex", "openhands", "openai", "gemini_cli", "otlp"):
        for path in sorted((shared_transcripts / folder).rglob("*")):
            if not path.is_file() or "subagents" in path.parts or path.suffix not in (".jsonl", ".json", ".traj"):
                continue
            out = tmp_path / f"{folder}-{path.name}.jsonl"
            if cli("convert", path, "-o", out, "-q").exit_code != 0:
                continue  # (not a transcript: a README or a fixture of another kind)
            (calls, tokens, cost, said), (calls2, tokens2, cost2, said2) = figures(path), figures(out)
            assert (calls2, tokens2, cost2) == (calls, tokens, cost), path.name  # (the very figures)
            assert said2 == said, path.name  # (the window it is judged on and where from; what it billed)
            checked += 1
    assert checked


def test_subagent_files_left_out_of_a_folder_are_counted_by_their_recorded_cost(tmp_path, cli):
    """(#43 §6) A subagent's own file (``<session>/subagents/agent-*.jsonl``) is billed apart: a
    folder replay that leaves it out says what it cost, and ``inspect`` of its session too."""
    from compactlab.engine.cost.pricing import recorded_total

    folder = tmp_path / "project"
    folder.mkdir()
    main = Session().user("go").assistant("X", tool("task", "Task")).result("task", "done").assistant("Y", text("ok"))
    path = main.write(folder / "s1.jsonl")
    (folder / "s1" / "subagents").mkdir(parents=True)
    agent = Session(sidechain=True).user("look").assistant("A1", tool("g", "Grep"), input_tokens=9000).result("g")
    agent_path = agent.assistant("A2", text("found it"), output_tokens=400).write(folder / "s1" / "subagents" / "agent-a1.jsonl")
    cost = recorded_total(load_transcript(agent_path))
    assert cost and cost > 0
    r = cli("replay", folder, "-p", "none", "--dry-run")
    assert r.exit_code == 0 and f"left out 1 subagent session(s) of the folder(s), whose recordings cost ${cost:,.4f}" \
        in r.stderr
    r = cli("inspect", path, "--format", "json")
    assert orjson.loads(r.stdout)["subagents_recorded_cost_usd"] == pytest.approx(cost, abs=1e-6)


@pytest.mark.parametrize("read", ["0", "lazy", "1"])
def test_a_converted_session_keeps_what_its_recording_said_of_itself(tmp_path, cli, monkeypatch, read):
    """A Claude Code 2.0.x session compacts at 155,000 tokens (the preset's trigger by version);
    converted, it lost its version and replayed at 2.1's 167,000, and inspect could not audit its
    compactions as Claude Code's. convert now keeps what the recording said of itself (its version;
    Codex's window and what mini-swe-agent billed, held by the shared sessions' round trip) and
    each reader (in this process, left in the file, or read ahead by a second one) has it before
    the first call."""
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", read)
    session = Session().user("go", version="2.0.76")
    for k, prompt in enumerate((40_000, 90_000, 130_000, 158_000, 159_000)):
        session.assistant(f"m{k}", {"type": "tool_use", "id": f"t{k}", "name": "Bash", "input": {"command": f"ls {k}"}},
                          input_tokens=prompt - 3000, version="2.0.76").result(f"t{k}", f"file_{k}.py", version="2.0.76")
    path = session.assistant("end", {"type": "text", "text": "done"}, input_tokens=157_000, version="2.0.76") \
        .write(tmp_path / "s.jsonl")
    out = tmp_path / "converted.jsonl"
    assert cli("convert", path, "-o", out, "-q").exit_code == 0
    runs = []
    for source, calibrated in ((path, []), (out, []), (out, ["--no-calibrate"]), (path, ["--no-calibrate"])):
        # (uncalibrated, a file is streamed, not loaded whole to fit its usage: read ahead with "1")
        r = cli("replay", source, "-p", "claude-code", "--dry-run", "--format", "json", "-q", *calibrated)
        assert r.exit_code == 0, r.stderr
        runs.append(json.loads(r.stdout)["runs"][0]["summary"])
    figures = [(s["summaries"], s["tokens_total"], s["cost_usd"], s["window_source"]) for s in runs]
    assert runs[0]["summaries"] == 1 and runs[3]["summaries"] == 1  # (past 155,000: 2.0's trigger, not 2.1's)
    assert figures[1] == figures[0] and figures[2] == figures[3]
    assert load_transcript(str(out)).metadata["version"] == "2.0.76"

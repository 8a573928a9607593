"""Your harness's compactions, audited (#57 §1): `inspect --compactions` lists every compaction a
recording holds with the threshold the harness's version and your settings imply, and whether it
fired there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compactlab import load_transcript, replay
from compactlab.audit import Setting, audit, claude_code_threshold, settings_for
from compactlab.errors import UsageError
from helpers import ClaudeCodeSession, codex_rollout


def _session(tmp_path, version: str, sizes: list[int], pre_tokens: int, trigger: str = "auto") -> str:
    """Calls whose contexts (prompt + output) are ``sizes``, then a compaction at ``pre_tokens``."""
    s = ClaudeCodeSession().user("go", version=version)
    for k, size in enumerate(sizes):
        s.assistant(f"m{k}", {"type": "tool_use", "id": f"t{k}", "name": "Bash", "input": {"command": "ls"}},
                    input_tokens=size - 3000 - 5, version=version).result(f"t{k}", "x", version=version)
    s.line({"type": "system", "subtype": "compact_boundary", "parentUuid": None, "logicalParentUuid": f"u{s.n}",
            "uuid": "b1", "sessionId": "s1", "timestamp": "2026-11-28T10:00:00Z", "version": version,
            "compactMetadata": {"trigger": trigger, "preTokens": pre_tokens}})
    s.user("This session is being continued... summary", isCompactSummary=True, isVisibleInTranscriptOnly=True)
    s.user("go on").assistant("last", {"type": "text", "text": "done"}, input_tokens=40_000)
    return s.write(tmp_path / f"s-{version}.jsonl")


def _row(path: str, *given: str) -> dict:
    return audit(load_transcript(path), settings_for(given, env={}, home="/nonexistent"))["compactions"][0]


@pytest.mark.parametrize("version, sizes, pre, threshold, fired", [
    ("2.1.39", [150_000, 166_000, 167_094], 167_731, 167_000, "where it fires: the first check past 167,000"),
    ("2.0.76", [140_000, 154_000, 155_500], 155_979, 155_000, "where it fires: the first check past 155,000"),
    ("2.1.39", [150_000, 168_000, 169_000], 169_500, 167_000, "late: the context was 168,000"),
    ("2.1.39", [100_000, 110_000, 120_000], 121_000, 167_000, "before 167,000: the settings given are not the ones"),
])
def test_each_auto_compaction_is_held_to_the_threshold_its_version_implies(tmp_path, version, sizes, pre, threshold,
                                                                            fired):
    row = _row(_session(tmp_path, version, sizes, pre))
    assert (row["threshold"], row["tokens_before"], row["call"], row["time"]) == (threshold, pre, 3,
                                                                                 "2026-11-28T10:00:00Z")
    assert row["tokens_after"] == 43_000 and row["share_of_window"] == round(pre / 200_000, 4)
    assert fired in row["fired"], row


def test_the_settings_lower_or_turn_off_and_say_where_they_came_from(tmp_path):
    path = _session(tmp_path, "2.1.39", [150_000, 166_000, 167_094], 167_731)
    low = _row(path, "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=60")
    assert low["threshold"] == 120_000 and "(--setting): 60% of 200,000 = 120,000" in low["threshold_source"]
    assert "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=60 implies 120,000" in low["fired"] and low["fired"].endswith("not applied")
    high = _row(path, "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=95")  # (it can only lower the threshold)
    assert high["threshold"] == 167_000 and "which Claude Code ignores" in high["threshold_source"]
    off = _row(path, "autoCompactEnabled=false")
    assert off["threshold"] is None and "not applied" in off["fired"]
    # (autoCompactWindow, or CLAUDE_CODE_AUTO_COMPACT_WINDOW, sets the window only where under the model's: Claude
    # Code clamps it to the model's, so 400,000 on a 200,000 model is 200,000's 167,000; before, it said 367,000)
    wide = _row(path, "autoCompactWindow=400000")
    assert wide["threshold"] == 167_000 and wide["fired"].startswith("where it fires"), wide
    assert "CLAUDE_CODE_AUTO_COMPACT_WINDOW=400,000, --setting, is over the model's 200,000" in wide["threshold_source"]
    narrow = _row(path, "autoCompactWindow=150000")
    assert narrow["threshold"] == 117_000 and "the window from CLAUDE_CODE_AUTO_COMPACT_WINDOW" in narrow["threshold_source"]
    manual = _row(_session(tmp_path, "2.1.39", [50_000], 50_100, trigger="manual"))
    assert manual["threshold"] is None and manual["fired"].startswith("manual")


def test_settings_come_from_the_flag_the_environment_and_the_settings_file(tmp_path):
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text(json.dumps({"env": {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "70"},
                                                               "autoCompactWindow": 300000}))
    got = settings_for(["CLAUDE_CODE_AUTO_COMPACT_WINDOW=250000"], env={"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "50"},
                       home=str(home))
    assert got["CLAUDE_CODE_AUTO_COMPACT_WINDOW"].source == "--setting"
    assert (got["CLAUDE_AUTOCOMPACT_PCT_OVERRIDE"].value, got["CLAUDE_AUTOCOMPACT_PCT_OVERRIDE"].source) == (
        "50", "the environment")
    only_file = settings_for([], env={}, home=str(home))
    assert only_file["CLAUDE_AUTOCOMPACT_PCT_OVERRIDE"].source == "~/.claude/settings.json"
    assert claude_code_threshold("2.1.3", 200_000, only_file)[0] == 140_000  # 70% of 200,000 (the file's 300,000, clamped)
    assert claude_code_threshold("2.1.3", 1_000_000, only_file)[0] == 210_000  # 70% of the file's 300,000
    with pytest.raises(UsageError, match="not KEY=VALUE of a setting"):
        settings_for(["NOPE=1"], env={}, home=str(home))
    with pytest.raises(UsageError, match="CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=lots"):
        claude_code_threshold("2.1.3", 200_000, settings_for(["CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=lots"], env={},
                                                               home="/nonexistent"))
    (home / ".claude" / "settings.json").write_text("[1, 2]")
    with pytest.raises(UsageError, match="not a settings file"):
        settings_for([], env={}, home=str(home))


def _settings_file(folder, name: str, doc: dict) -> None:
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(doc))


def test_a_sessions_project_settings_override_the_users_as_claude_code_reads_them(tmp_path):
    """Claude Code reads a project's .claude/settings.local.json over its .claude/settings.json over
    ~/.claude/settings.json; the project is the folder the session's first record says it ran in.
    The environment and --setting still come first; a folder not here is said, not guessed."""
    from compactlab.audit import session_settings

    home, project = tmp_path / "home", tmp_path / "work" / "app"
    project.mkdir(parents=True)
    _settings_file(home, ".claude/settings.json", {"env": {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "80"}})
    path = _session(tmp_path, "2.1.39", [100_000, 110_000, 121_000], 121_500)
    lines = Path(path).read_text().splitlines()
    first = json.loads(lines[1])  # (the snapshot line before it records no folder)
    lines[1] = json.dumps({**first, "cwd": str(project)})
    lines[2] = json.dumps({**json.loads(lines[2]), "cwd": str(project / "src")})  # (a later cd: not the project)
    Path(path).write_text("\n".join(lines) + "\n")
    loaded = load_transcript(path)
    assert loaded.started_in == str(project)
    from compactlab.transcripts.homes import started_in as first_cwd

    relative = tmp_path / "rel.jsonl"
    relative.write_text(json.dumps({"type": "user", "cwd": "app"}) + "\n")
    assert first_cwd(relative) is None  # (read against compactlab's own folder, it would be another's)

    def row(given=(), env=None):
        got = audit(loaded, session_settings(loaded, given, env=env or {}, home=str(home)))
        return got, got["compactions"][0]

    got, user_only = row()
    assert user_only["threshold"] == 160_000 and got["project_settings"] == "read"
    assert got["settings"]["CLAUDE_AUTOCOMPACT_PCT_OVERRIDE"]["source"] == "~/.claude/settings.json"
    _settings_file(project, ".claude/settings.json", {"env": {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "60"}})
    got, shared = row()
    assert shared["threshold"] == 120_000 and "where it fires" in shared["fired"], shared
    assert got["settings"]["CLAUDE_AUTOCOMPACT_PCT_OVERRIDE"] == {
        "value": "60", "source": str(project / ".claude" / "settings.json")}
    _settings_file(project, ".claude/settings.local.json", {"env": {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "55"}})
    assert row()[1]["threshold"] == 110_000
    assert row(env={"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "50"})[1]["threshold"] == 100_000
    assert row(["CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=45"])[1]["threshold"] == 90_000
    (project / ".claude" / "settings.local.json").write_text("[]")
    with pytest.raises(UsageError, match=r"settings\.local\.json: not a settings file"):
        row()
    (project / ".claude" / "settings.local.json").unlink()
    # a project under the home folder is named from ~; one that is not a folder here is not read
    inner = home / "code" / "app"
    _settings_file(inner, ".claude/settings.json", {"autoCompactEnabled": False})
    got = settings_for([], env={}, home=str(home), project=str(inner))
    assert got["DISABLE_AUTO_COMPACT"].source == "~/code/app/.claude/settings.json"
    assert settings_for([], env={}, home="/", project=str(inner))["DISABLE_AUTO_COMPACT"].source == str(
        inner / ".claude" / "settings.json")  # (a home of / shortens nothing)
    assert settings_for([], env={}, home=str(home), project=str(tmp_path / "gone")) == settings_for(
        [], env={}, home=str(home))
    _settings_file(project, ".qwen/settings.json", {"model": {"chatCompression": {"contextPercentageThreshold": 0.5}}})
    key = "model.chatCompression.contextPercentageThreshold"
    assert key not in session_settings(loaded, env={}, home=str(home))  # (a Claude Code session: not Qwen's)
    assert settings_for([], env={}, home=str(home), project=str(project))[key].value == "0.5"


def test_inspect_compactions_says_a_sessions_project_is_not_here(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE", raising=False)
    path = _session(tmp_path, "2.1.39", [150_000, 166_000, 167_094], 167_731)
    text = Path(path).read_text().replace('"sessionId":"s1"', '"sessionId":"s1","cwd":"/nowhere/app\\u001b[31m"', 1)
    Path(path).write_text(text)
    r = cli("inspect", "--compactions", path)
    assert r.exit_code == 0, r.stderr
    assert "started in /nowhere/app\\x1b[31m, not a folder here: its project's settings are not read" in r.stdout
    doc = json.loads(cli("inspect", "--compactions", path, "--format", "json").stdout)
    assert (doc["sessions"][0]["started_in"], doc["sessions"][0]["project_settings"]) == (
        "/nowhere/app\x1b[31m", "not a folder here")


def test_inspect_compactions_prints_a_line_each_and_json(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE", raising=False)
    path = _session(tmp_path, "2.1.39", [150_000, 166_000, 167_094], 167_731)
    r = cli("inspect", "--compactions", path)
    assert r.exit_code == 0, r.stderr
    assert "(claude-code, 2.1.39): window 200,000" in r.stdout
    assert ("#1 call 3 2026-11-28T10:00:00Z: auto at 167,731 (83.9% of 200,000) -> 43,000; implied 167,000 "
            "[2.1.x's default: 200,000 - 20,000 - 13,000 = 167,000]: where it fires") in r.stdout, r.stdout
    doc = json.loads(cli("inspect", "--compactions", path, "--setting", "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=60",
                         "--format", "json").stdout)
    [session] = doc["sessions"]
    assert session["settings"]["CLAUDE_AUTOCOMPACT_PCT_OVERRIDE"] == {"value": "60", "source": "--setting"}
    assert session["compactions"][0]["threshold"] == 120_000
    bad = cli("inspect", path, "--setting", "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=60")
    assert bad.exit_code == 2 and "--setting is read with --compactions" in bad.stderr


def test_a_goose_compaction_is_held_to_goose_auto_compact_threshold(cli, tmp_path, monkeypatch):
    """goose's rule: the share of the window GOOSE_AUTO_COMPACT_THRESHOLD sets (0.8 by default, 0
    off), on the context its last call's usage measured; the setting read from the environment, or
    given; tune's base and a replay's note read it as the audit does."""
    from compactlab.corpus.harness_settings import Setting, current, goose_threshold, share_threshold
    from helpers import goose_store

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("GOOSE_AUTO_COMPACT_THRESHOLD", raising=False)
    session = f"{goose_store(tmp_path / 'sessions.db')}#20251122_1"
    doc = json.loads(cli("inspect", "--compactions", session, "--format", "json").stdout)
    [row] = doc["sessions"][0]["compactions"]
    assert (row["tokens_before"], row["window"], row["threshold"]) == (3_105, 200_000, 160_000)
    assert row["threshold_source"] == "goose's default: 0.8 of 200,000 = 160,000"
    assert row["fired"] == "fired at 3,105, before 160,000: the settings given are not the ones it ran with"
    from compactlab import load_policy, replay  # (one answer: the goose preset's trigger on this recording)

    run = replay(load_transcript(session), load_policy("goose"))
    assert run.summary.summary_trigger == row["threshold"] and "goose's own" in run.summary.summary_trigger_source
    # (the check before measured 5,940: a threshold of 3,000 was passed a check earlier)
    doc = json.loads(cli("inspect", "--compactions", session, "--setting", "GOOSE_AUTO_COMPACT_THRESHOLD=0.015",
                         "--format", "json").stdout)
    [row] = doc["sessions"][0]["compactions"]
    assert row["threshold"] == 3_000 and row["fired"].startswith("GOOSE_AUTO_COMPACT_THRESHOLD=0.015 implies 3,000")
    monkeypatch.setenv("GOOSE_AUTO_COMPACT_THRESHOLD", "0.0")
    doc = json.loads(cli("inspect", "--compactions", session, "--format", "json").stdout)
    [row] = doc["sessions"][0]["compactions"]
    assert row["threshold"] is None and row["fired"] == "fired although auto-compaction is off: not applied"
    assert doc["sessions"][0]["settings"]["GOOSE_AUTO_COMPACT_THRESHOLD"] == {"value": "0.0", "source": "the environment"}
    given = {"GOOSE_AUTO_COMPACT_THRESHOLD": Setting("0.6", "x")}
    assert current("goose", given) == (["summary.trigger_share=0.6"], "GOOSE_AUTO_COMPACT_THRESHOLD=0.6 (x): that share "
                                                                        "of each session's window (120,000 of 200,000)")
    assert current("goose", {"GOOSE_AUTO_COMPACT_THRESHOLD": Setting("0", "x")})[0] == ["summary.enabled=false"]
    assert current("goose", {}) is None and goose_threshold(128_000, {})[0] == 102_400
    assert current("goose", {"GOOSE_AUTO_COMPACT_THRESHOLD": Setting("0.8", "x")})[0] == []  # (the default)
    # goose turns it off at or below 0 and at or above 1 (check_if_compaction_needed), not an error
    for value in ("1.5", "1", "-0.2"):
        assert goose_threshold(200_000, {"GOOSE_AUTO_COMPACT_THRESHOLD": Setting(value, "e")}) == (
            None, f"auto-compaction off (GOOSE_AUTO_COMPACT_THRESHOLD={value} (e))")
    assert goose_threshold(200_000, {"GOOSE_AUTO_COMPACT_THRESHOLD": Setting("0.99", "e")})[0] == 198_000
    with pytest.raises(UsageError, match=r"=lots \(the environment\): not a number$"):
        goose_threshold(200_000, {"GOOSE_AUTO_COMPACT_THRESHOLD": Setting("lots", "the environment")})
    qwen = "model.chatCompression.contextPercentageThreshold"
    assert share_threshold("qwen-code", 200_000, {qwen: Setting("0", "f")})[0] is None  # (Qwen Code: <= 0 off)
    assert current("qwen-code", {qwen: Setting("-1", "f")})[0] == ["summary.enabled=false"]
    monkeypatch.setenv("GOOSE_AUTO_COMPACT_THRESHOLD", "0.6")
    r = cli("replay", session, "-p", "goose", "--out", tmp_path / "r")
    assert r.exit_code == 0 and ("you set GOOSE_AUTO_COMPACT_THRESHOLD=0.6 (the environment): that share of each "
                                 "session's window (120,000 of 200,000); -p goose --set summary.trigger_share=0.6 "
                                 "replays yours") in r.stderr, r.stderr
    # (one answer: the share taken of the session's window, as the audit takes it)
    run = replay(load_transcript(session), load_policy("goose", ["summary.trigger_share=0.6"]))
    [row] = audit(load_transcript(session), settings_for([], env={"GOOSE_AUTO_COMPACT_THRESHOLD": "0.6"},
                                                         home=str(tmp_path)))["compactions"]
    assert run.summary.summary_trigger == row["threshold"] == 120_000


@pytest.mark.parametrize("version, window, given, threshold, source, fired", [
    # (Qwen Code 0.17 and later: max(70% of the window, the window less 33,000), no setting read)
    ("0.19.0", 1_000_000, (), 967_000,
     "Qwen Code 0.19.0's rule: max(70% of 1,000,000, 1,000,000 less 33,000) = 967,000 (QwenLM/qwen-code#4345)",
     "at 13,100, before 967,000: a /compress you typed, or a setting other than the one given (the recording "
     "does not say which)"),
    ("0.17.0", 1_000_000, ("model.chatCompression.contextPercentageThreshold=0.01",), 967_000,
     "Qwen Code 0.17.0's rule: max(70% of 1,000,000, 1,000,000 less 33,000) = 967,000 (QwenLM/qwen-code#4345); "
     "model.chatCompression.contextPercentageThreshold = 0.01 (--setting) is ignored by it", "at 13,100, before"),
    ("0.19.0", 18_000, (), 12_600, "Qwen Code 0.19.0's rule: max(70% of 18,000, 18,000 less 33,000) = 12,600 "
     "(QwenLM/qwen-code#4345)", "where the automatic one fires: the first check past 12,600 (or a /compress "
     "you typed there)"),
    # (0.16 and before: the share contextPercentageThreshold sets, 0.7 by default, 0 or below off)
    ("0.16.2", 1_000_000, (), 700_000, "qwen-code's default: 0.7 of 1,000,000 = 700,000", "at 13,100, before 700,000"),
    ("0.16.2", 1_000_000, ("model.chatCompression.contextPercentageThreshold=0.01",), 10_000,
     "model.chatCompression.contextPercentageThreshold = 0.01 (--setting): 0.01 of 1,000,000 = 10,000",
     "late: the context was 12,070 (past 10,000) a check before, where the automatic one would have fired unless "
     "it failed there; or a /compress you typed"),
    ("0.16.2", 1_000_000, ("model.chatCompression.contextPercentageThreshold=0",), None,
     "auto-compaction off (model.chatCompression.contextPercentageThreshold = 0 (--setting))",
     "off, so a /compress you typed, or a setting other than the one given"),
])
def test_a_qwen_code_compression_is_held_to_its_versions_rule(tmp_path, version, window, given, threshold, source,
                                                               fired):
    """Qwen Code 0.17 and later compress by their own rule (QwenLM/qwen-code#4345), which the
    setting 0.16 read does not change; 0.16 and before at the share contextPercentageThreshold
    sets. A Qwen Code recording does not say whether a compression was automatic or a /compress
    typed: one the rule does not explain is put down to either, not to the settings alone."""
    data = (Path(__file__).resolve().parent / "transcripts" / "data" / "qwen" / "built-compression.jsonl").read_bytes()
    path = tmp_path / "s.jsonl"
    path.write_bytes(data.replace(b'"version":"0.19.0"', f'"version":"{version}"'.encode())
                     .replace(b'"contextWindowSize":1000000', f'"contextWindowSize":{window}'.encode()))
    row = _row(str(path), *given)
    assert (row["tokens_before"], row["window"], row["threshold"]) == (13_100, window, threshold), row
    assert row["threshold_source"] == source and row["fired"].startswith(fired), row


def test_the_shared_claude_code_compactions_fire_where_2_1_fires(cli, shared_transcripts, monkeypatch, tmp_path):
    """On the shared Claude Code sessions (2.1.39), each recorded auto-compaction is at the first
    check past 167,000."""
    monkeypatch.setenv("HOME", str(tmp_path))
    sessions = [p for p in sorted((shared_transcripts / "claude_code").rglob("*.jsonl")) if "subagents" not in p.parts]
    doc = json.loads(cli("inspect", "--compactions", *sessions, "--format", "json").stdout)
    rows = [row for s in doc["sessions"] for row in s["compactions"]]
    assert rows and all(r["fired"].startswith("where it fires") for r in rows if r["trigger"] == "auto"), rows


@pytest.mark.parametrize("version, sizes, pre", [
    ("2.1.39", [150_000, 166_000, 167_094], 167_731),
    ("2.0.76", [140_000, 154_000, 155_500], 155_979),
    ("1.0.98", [140_000, 154_000, 155_500], 155_979),
])
def test_the_claude_code_preset_fires_at_the_recorded_call_on_every_version(tmp_path, version, sizes, pre):
    """(#57 §2) One preset, the trigger of the version the session names: it compacts at the call
    Claude Code did (2.0.76 compacted at 155,979; the 2.1 trigger of 167,000 fired a call late)."""
    from compactlab import load_policy, replay

    t = load_transcript(_session(tmp_path, version, sizes, pre))
    [recorded] = t.compactions
    run = replay(t, load_policy("claude-code"))
    fired = [e.call for e in run.events if "summary" in e.layers]
    assert fired and fired[0] == _row(t.path)["call"], (fired, version)
    if not version.startswith("2.1"):  # (the 2.1 trigger alone: not there)
        late = replay(t, load_policy("claude-code", ["summary.trigger=167000", "summary.trigger_by_version={}"]))
        assert not [e.call for e in late.events if "summary" in e.layers][:1] == fired[:1]
    # a setting that lowers the trigger lowers it on every version (CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=83 is above
    # 2.0's default: ignored there, as Claude Code ignores it; 70% is below every version's)
    for pct, same in ((83, not version.startswith("2.1")), (70, False)):
        run = replay(t, load_policy("claude-code", [f"summary.trigger={2000 * pct}"]))
        calls = [e.call for e in run.events if "summary" in e.layers]
        assert (calls[:1] == fired[:1]) is same, (version, pct, calls, fired)


def test_the_harness_rules_give_the_harnesses_own_figures():
    """``harness_triggers``: Claude Code's window less the reply's reserve and 13,000 (by version),
    Qwen Code's 70% (to 0.16) or max(70%, the window less 33,000) (from 0.17), goose's 80%, Pi's
    window less compaction.reserveTokens (16,384), OpenCode's less 32,000 and compaction.reserved."""
    from compactlab.engine.layers.harness_triggers import harness_trigger

    cases = [("claude-code", "2.1.39", 200_000, 167_000), ("claude-code", "2.1.39", 1_000_000, 967_000),
             ("claude-code", "2.0.76", 200_000, 155_000), ("claude-code", "1.0.98", 1_000_000, 955_000),
             ("claude-code", None, 200_000, 167_000), ("qwen-code", "0.16.2", 1_000_000, 700_000),
             ("qwen-code", "0.19.0", 1_000_000, 967_000), ("qwen-code", "0.17.1", 60_000, 42_000),
             ("qwen-code", None, 200_000, 140_000), ("goose", None, 200_000, 160_000), ("goose", "1.9.0", 128_000, 102_400)]
    assert [harness_trigger(rule, v, w)[0] for rule, v, w, _ in cases] == [at for *_, at in cases]
    assert harness_trigger("claude-code", "2.1.39", 1_000_000)[1] == "2.1.x's default: 1,000,000 - 20,000 - 13,000 = 967,000"
    reserved = [("pi", 200_000, 0, 183_616), ("pi", 400_000, 0, 383_616), ("pi", 1_000_000, 50_000, 950_000),
                ("opencode", 200_000, 0, 168_000), ("opencode", 400_000, 0, 368_000), ("opencode", 200_000, 20_000, 148_000)]
    assert [harness_trigger(rule, None, w, 0.0, r)[0] for rule, w, r, _ in reserved] == [at for *_, at in reserved]
    # (a reserve of the whole window: past it at every check, never a trigger under 0)
    assert harness_trigger("pi", None, 200_000, 0.0, 250_000) == (
        0, "200,000 - 250,000 (compaction.reserveTokens 250,000) is under 0: 0, every check")
    with pytest.raises(UsageError, match=r"reserveTokens=-3 \(x\): not a number from 0 to 10,000,000$"):
        from compactlab.corpus.harness_settings import Setting, reserve_threshold

        reserve_threshold("pi", 200_000, {"compaction.reserveTokens": Setting("-3", "x")})
    with pytest.raises(ValueError, match="no trigger rule 'gemini-cli'"):
        harness_trigger("gemini-cli", None, 1_048_576)


def _beta(path: str) -> str:
    """The Claude Code session at ``path`` as the 1M-context beta records it (its model's ``[1m]``)."""
    data = Path(path).read_bytes()
    Path(path).write_bytes(data.replace(b'"model":"claude-opus-4-6"', b'"model":"claude-opus-4-6[1m]"'))
    return path


def test_a_harness_preset_compacts_where_its_harness_does_on_each_of_its_recordings_windows(tmp_path, monkeypatch):
    """One answer: the claude-code preset compacts where Claude Code does by default on each of its
    recordings' own windows, by its version (summary.trigger_rule): 967,000 with the 1M-context
    beta's 1,000,000, the threshold inspect --compactions holds the recorded compaction to, on both
    cores; before, it compacted every window at 167,000 (and its reactive compaction at 200,000).
    --set summary.trigger=N is one trigger for every recording; another harness's recording runs at
    the preset's trigger, said so."""
    from compactlab import load_policy, replay
    from helpers import on_both_cores

    path = _beta(_session(tmp_path, "2.1.39", [950_000, 966_000, 967_094], 967_731))
    t = load_transcript(path)
    row = _row(path)
    assert (row["window"], row["threshold"]) == (1_000_000, 967_000) and row["fired"].startswith("where it fires")
    python, native = on_both_cores(monkeypatch, t, load_policy("claude-code"))
    for run in (python, native):
        assert run.summary.summary_trigger == row["threshold"] == 967_000, run.summary.summary_trigger_source
        assert [e.call for e in run.events if "summary" in e.layers][:1] == [row["call"]] and run.summary.reactive == 0
    assert python.summary.summary_trigger_source == (
        "967,000 tokens: Claude Code's own on the recording's window (summary.trigger_rule), 2.1.x's default: "
        "1,000,000 - 20,000 - 13,000 = 967,000")
    assert python.summary.to_dict() | {"core": ""} == native.summary.to_dict() | {"core": ""}
    one = replay(t, load_policy("claude-code", ["summary.trigger=167000"]))  # (one trigger: the rule off)
    assert one.summary.summary_trigger == 167_000 and one.summary.summary_trigger_source == "167,000 tokens (summary.trigger)"
    assert [e.call for e in one.events if "summary" in e.layers][0] < row["call"]  # (past 167,000 long before)
    assert load_policy("claude-code", ["summary.trigger=167000", "summary.trigger_rule=claude-code"]).summary.trigger_rule
    # (on the 200,000 window, the figures of before; on another harness's recording, the preset's trigger)
    plain = _session(tmp_path, "2.1.39", [150_000, 166_000, 167_094], 167_731)
    assert replay(load_transcript(plain), load_policy("claude-code")).summary.summary_trigger == 167_000
    # (a recording that shows a prompt past 200,000 answered (249,995) ran on the 1M-context window, whose [1m]
    # Claude Code does not record: both the replay and the audit take 967,000 of it; before, both kept 200,000's
    # 167,000, which Claude Code would have compacted at before the 240,000 call was sent)
    raised = _session(tmp_path, "2.1.40", [150_000, 240_000, 250_000], 251_000)
    run, row = replay(load_transcript(raised), load_policy("claude-code")), _row(raised)
    assert run.summary.window_tokens == row["window"] == 1_000_000 and \
        run.summary.summary_trigger == row["threshold"] == 967_000, (run.summary.window_tokens, row)
    assert run.summary.window_source == ("1,000,000 tokens: Claude Code with the 1M-context window (a prompt past its "
                                         "default 200,000 answered); the recording compacted at 251,000")
    assert row["fired"] == ("fired at 251,000, before 967,000: the settings given are not the ones it ran with") \
        and not run.events  # (where it compacted: another setting's)
    messages = tmp_path / "messages.jsonl"  # (Anthropic messages: not Claude Code's own recording)
    messages.write_text('{"role":"user","content":"go"}\n{"role":"assistant","content":[{"type":"text","text":"ok"}]}\n')
    run = replay(load_transcript(str(messages)), load_policy("claude-code"))
    assert run.summary.summary_trigger == 167_000 and run.summary.summary_trigger_source == (
        "167,000 tokens: Claude Code's rule on 200,000, its preset's window (summary.trigger_rule; not Claude Code's "
        "own recording), 2.1.x's default: 200,000 - 20,000 - 13,000 = 167,000")


def test_claude_codes_auto_compact_window_is_one_trigger_in_the_audit_the_preset_and_your_settings(tmp_path, monkeypatch):
    """CLAUDE_CODE_AUTO_COMPACT_WINDOW (autoCompactWindow) sets the window Claude Code's trigger is taken
    of, clamped to the model's: 400,000 gives 367,000 on the 1M window and leaves 200,000's 167,000.
    The audit, the preset (summary.trigger_window) and your settings read as the preset's overrides say
    the same; before, the preset had no such key, so a 1M session with it set was replayed at 967,000."""
    from compactlab import load_policy
    from compactlab.corpus.harness_settings import current, setting_of, set_otherwise
    from compactlab.engine.layers.harness_triggers import harness_trigger

    assert harness_trigger("claude-code", "2.1.39", 1_000_000, window_set=400_000)[0] == 367_000
    assert harness_trigger("claude-code", "2.1.39", 200_000, window_set=400_000)[0] == 167_000
    wide = _session(tmp_path, "2.1.40", [150_000, 240_000, 366_000, 367_500], 368_000)  # (on the 1M window)
    plain = _session(tmp_path, "2.1.39", [150_000, 166_000, 167_094], 167_731)
    policy = load_policy("claude-code", ["summary.trigger_window=400000"])
    for path, at in ((wide, 367_000), (plain, 167_000)):
        row = _row(path, "autoCompactWindow=400000")
        run = replay(load_transcript(path), policy)
        assert run.summary.summary_trigger == row["threshold"] == at, (run.summary.summary_trigger_source, row)
        assert row["fired"].startswith("where it fires") and [e.call for e in run.events][:1] == [row["call"]]
    assert replay(load_transcript(wide), load_policy("claude-code")).summary.summary_trigger == 967_000
    sets, words = current("claude-code", {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": Setting("400000", "the environment")})
    assert sets == ["summary.trigger_window=400000"] and "367,000 of the 1M-context window" in words
    monkeypatch.setenv("CLAUDE_CODE_AUTO_COMPACT_WINDOW", "400000")
    assert set_otherwise(load_policy("claude-code"))[2] == "--set summary.trigger_window=400000"
    # (a tuned percentage on top of it is still Claude Code's setting to paste; the window stays yours)
    title, lines = setting_of(load_policy("claude-code", ["summary.trigger_window=400000", "summary.trigger_share=0.6"]))
    assert lines[0] == "export CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=60"
    with pytest.raises(Exception, match="trigger_window is the window the rule of a harness that takes one"):
        load_policy("pi", ["summary.trigger_window=400000"])


def test_the_codex_preset_and_the_audit_take_codexs_limit_of_each_rollouts_window(cli, tmp_path, monkeypatch):
    """One answer: Codex compacts at 90% of the model's window, or at model_auto_compact_token_limit where
    lower; a rollout records the 95% of the window a prompt may fill. On a rollout that records
    380,000 (a 400,000 model) the preset and the audit both take 360,000, the call where Codex
    compacted, on both cores; before, the preset compacted every rollout at 244,800 (here at call 1,
    three calls early). The limit is a cap: 300,000 lowers it, 400,000 does not."""
    from compactlab import load_policy
    from compactlab.engine.layers.harness_triggers import harness_trigger
    from helpers import on_both_cores

    assert [harness_trigger("codex", None, w)[0] for w in (258_400, 380_000, 950_000)] == [244_800, 360_000, 900_000]
    assert harness_trigger("codex", None, 380_000, cap=300_000)[0] == 300_000
    assert harness_trigger("codex", None, 258_400, cap=300_000)[0] == 244_800
    path = codex_rollout(tmp_path / "r.jsonl", 380_000, [300_000, 340_000, 359_000, 361_000, 30_000], 4)
    t = load_transcript(path)
    row = _row(path)
    assert (row["window"], row["threshold"], row["call"]) == (380_000, 360_000, 4), row
    assert row["fired"].startswith("where it fires") and row["threshold_source"].startswith(
        "Codex's default: 90% of the model's 400,000 (the 380,000 a rollout records is the 95% of it a prompt may fill)")
    python, native = on_both_cores(monkeypatch, t, load_policy("codex"))
    for run in (python, native):
        assert run.summary.summary_trigger == 360_000 and [e.call for e in run.events][:1] == [4]
    assert python.summary.summary_trigger_source.startswith("360,000 tokens: Codex CLI's own on the recording's window")
    before = replay(t, load_policy("codex", ["summary.trigger=244800"]))  # (the one trigger of before)
    assert [e.call for e in before.events][:1] == [1]
    capped = replay(t, load_policy("codex", ["summary.trigger_cap=300000"]))
    assert capped.summary.summary_trigger == _row(path, "model_auto_compact_token_limit=300000")["threshold"] == 300_000
    assert replay(t, load_policy("codex", ["summary.trigger_cap=400000"])).summary.summary_trigger == 360_000
    with pytest.raises(Exception, match="trigger_cap is the most the trigger is by the rule of a harness"):
        load_policy("claude-code", ["summary.trigger_cap=100000"])


def test_codexs_limit_is_read_from_its_config_and_checked_by_replaying_its_preset(cli, shared_transcripts, tmp_path,
                                                                                   monkeypatch):
    """Codex counts what its rollout does not record (earlier reasoning): the shared rollout's
    compaction is where the codex preset, replayed with the limit, compacts; a limit in
    ~/.codex/config.toml (or --setting) that would have fired elsewhere is said not to be the one it ran with."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    [rollout] = [p for p in (shared_transcripts / "codex").glob("rollout-*.jsonl")
                 if load_transcript(str(p)).compactions][:1] or [None]
    if rollout is None:
        pytest.skip("no shared Codex rollout records a compaction")
    doc = json.loads(cli("inspect", "--compactions", rollout, "--format", "json").stdout)
    [row] = doc["sessions"][0]["compactions"][:1]
    assert row["threshold"] == 244_800 and row["fired"].startswith("where it fires"), row
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex" / "config.toml").write_text("model_auto_compact_token_limit = 200000\n")
    doc = json.loads(cli("inspect", "--compactions", rollout, "--format", "json").stdout)
    session = doc["sessions"][0]
    assert session["settings"]["model_auto_compact_token_limit"]["source"] == "~/.codex/config.toml"
    assert session["compactions"][0]["threshold"] == 200_000
    assert "call(s) earlier: not the one it ran with" in session["compactions"][0]["fired"]


def test_codexs_config_that_is_no_toml_is_a_one_line_error(tmp_path):
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex" / "config.toml").write_text("model_auto_compact_token_limit = [")
    with pytest.raises(UsageError, match="not a Codex config compactlab can read"):
        settings_for([], env={}, home=str(tmp_path))
    got = settings_for(["model_auto_compact_token_limit=150000"], env={}, home="/nonexistent")
    assert got["model_auto_compact_token_limit"].value == "150000"


@pytest.mark.parametrize("preset, setting", [("claude-code", "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE"),
                                             ("codex", "model_auto_compact_token_limit"),
                                             ("goose", "GOOSE_AUTO_COMPACT_THRESHOLD"),
                                             ("qwen-code", "model.chatCompression.contextPercentageThreshold")])
def test_policies_show_lists_the_settings_the_harness_lets_you_change(cli, preset, setting):
    """(#57 §2) A harness's preset says which of the harness's settings it honours, with where
    they are set, their range, default and what they set, and whether the audit holds its
    compactions to them; the TOML stays a policy file."""
    import tomllib

    text = cli("policies", "show", preset).stdout
    assert f"# What {preset} lets you set" in text and f"#   {setting} (" in text
    assert "inspect --compactions audits it" in text, text
    assert tomllib.loads(text)["name"] == preset
    doc = json.loads(cli("policies", "show", preset, "--format", "json").stdout)
    assert doc["harness_settings"][0]["setting"].startswith(setting.split()[0])
    assert "harness_settings" not in json.loads(cli("policies", "show", "s08", "--format", "json").stdout)


def test_a_claude_code_compaction_says_what_its_own_request_cost(tmp_path):
    """(#57 §1) The compaction's own summary request is the agent-acompact subagent file that began
    just before it: its recorded cost (with output) stands beside the line."""
    from compactlab.engine.cost.pricing import recorded_total

    path = _session(tmp_path, "2.1.39", [150_000, 166_000, 167_094], 167_731)
    lines = [json.loads(line) for line in open(path)]
    for line in lines:
        if line.get("subtype") == "compact_boundary":
            line["timestamp"] = "2026-01-01T00:00:09Z"
    with open(path, "w") as f:
        f.write("".join(json.dumps(line) + "\n" for line in lines))
    agents = tmp_path / f"s-2.1.39" / "subagents"
    agents.mkdir(parents=True)
    request = ClaudeCodeSession(sidechain=True).user("summarise").assistant("s", {"type": "text", "text": "sum"},
                                                                            input_tokens=160_000, output_tokens=900)
    request.write(agents / "agent-acompact-abc123.jsonl")
    row = _row(path)
    assert row["request_file"] == "agent-acompact-abc123.jsonl"
    assert row["request_cost_usd"] == round(recorded_total(load_transcript(str(agents / "agent-acompact-abc123.jsonl"))),
                                            6) > 0
    (tmp_path / "alone").mkdir()
    alone = _row(_session(tmp_path / "alone", "2.1.39", [150_000, 166_000, 167_094], 167_731))
    assert "request_file" not in alone  # (no subagent file: nothing said)


@pytest.mark.parametrize("summary, dropped", [("the summary", 1), ("the summary names frobnicate_widget_v2", 0)])
def test_each_compaction_says_what_it_dropped_that_the_agent_later_used(tmp_path, summary, dropped):
    """(#57 §1) A string of a tool result before the compaction, used by a reply after it: dropped
    by the compaction unless its summary kept it."""
    s = ClaudeCodeSession().user("go", version="2.1.39")
    s.assistant("look", {"type": "tool_use", "id": "t0", "name": "Bash", "input": {"command": "grep -r widget"}},
                input_tokens=150_000, version="2.1.39").result("t0", "src/lib.rs: fn frobnicate_widget_v2() {}",
                                                               version="2.1.39")
    s.assistant("more", {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}},
                input_tokens=168_000, version="2.1.39").result("t1", "x", version="2.1.39")
    s.line({"type": "system", "subtype": "compact_boundary", "parentUuid": None, "logicalParentUuid": f"u{s.n}",
            "uuid": "b1", "sessionId": "s1", "timestamp": "2026-11-28T10:00:00Z", "version": "2.1.39",
            "compactMetadata": {"trigger": "auto", "preTokens": 168_500}})
    s.user(f"This session is being continued... {summary}", isCompactSummary=True, isVisibleInTranscriptOnly=True)
    s.user("go on").assistant("last", {"type": "text", "text": "I will now call frobnicate_widget_v2 again."},
                              input_tokens=40_000)
    row = _row(s.write(tmp_path / "s.jsonl"))
    assert row["dropped_later_used"] == dropped, row
    assert row["dropped_examples"] == (["frobnicate_widget_v2"] if dropped else [])
    from compactlab.reports.inspect_report import describe

    assert ("dropped 1 string(s) the agent later used ('frobnicate_widget_v2')" if dropped else
            "dropped nothing the agent later used") in describe(row)
    # (two paths of one folder, cut at their 40th character, read as one string twice: each is cut
    # where it keeps them apart)
    paths = ["home/USER/projects/spotter-worktrees/spotter/lib/spotter_web/live/session_live.ex",
             "home/USER/projects/spotter-worktrees/spotter/lib/spotter_web/live/subagent_live.ex"]
    said = describe({**row, "dropped_later_used": 9, "dropped_examples": [*paths, "LiveViews"]})
    shown = said.split("later used (")[1].rstrip(")").split(", ")
    assert len(shown) == 4 and shown[-1] == "..." and shown[2] == "'LiveViews'", said
    assert len(set(shown[:2])) == 2 and all(len(s) <= 42 for s in shown[:2]), said  # (40 and the quotes)
    assert shown[0].endswith("session_live.ex'") and shown[1].endswith("ubagent_live.ex'"), said


def _openhands_log(tmp_path, pairs: int, condense_before: int | None) -> str:
    """An OpenHands event log of ``pairs`` action/observation pairs, condensed before pair
    ``condense_before`` (None: never)."""
    events: list[dict] = [{"id": 0, "source": "user", "action": "message", "args": {"content": "go"}}]
    for k in range(pairs):
        if k == condense_before:
            events.append({"id": len(events), "source": "agent", "action": "condensation",
                           "args": {"forgotten_events_start_id": 1, "forgotten_events_end_id": len(events) - 1,
                                    "summary": "did things"}})
        response = {"id": f"r{k}", "model": "claude-3-5-sonnet", "created": 1738000000 + k,
                    "choices": [{"message": {"role": "assistant", "content": "doing", "tool_calls": [
                        {"id": f"c{k}", "function": {"name": "run", "arguments": "{\"command\": \"ls\"}"}}]}}],
                    "usage": {"prompt_tokens": 1000 + 10 * k, "completion_tokens": 5}}
        events.append({"id": len(events), "source": "agent", "action": "run", "args": {}, "tool_call_metadata": {
            "tool_call_id": f"c{k}", "function_name": "run", "model_response": response}})
        events.append({"id": len(events), "source": "agent", "observation": "run", "cause": len(events) - 1,
                       "content": f"out {k}", "tool_call_metadata": {"tool_call_id": f"c{k}"}})
    path = tmp_path / f"events-{condense_before}.json"
    path.write_text(json.dumps(events))
    return str(path)


def test_an_openhands_condensation_is_held_to_its_condensers_max_size(tmp_path):
    """(#57 §1) OpenHands counts events, of which the messages are a view: where its condenser
    (max_size 120) fires is found by replaying the openhands preset."""
    from compactlab import load_policy, replay

    plain = load_transcript(_openhands_log(tmp_path, 80, None))
    fires = next(e.call for e in replay(plain, load_policy("openhands")).events if "summary" in e.layers)
    row = _row(_openhands_log(tmp_path, 80, fires))
    assert row["trigger"] == "condenser" and row["call"] == fires and row["threshold"] == 120
    assert "max_size=120" in row["threshold_source"] and row["fired"].startswith("where it fires"), row
    early = _row(_openhands_log(tmp_path, 80, fires - 10))
    assert early["fired"] == "the threshold is not reached by then: not the one it ran with", early


def test_a_converted_session_is_audited_as_its_source(cli, tmp_path):
    """convert's file of a Claude Code session was audited as no harness's ("no rule known here for
    this harness's threshold"), without its compaction's time: it now keeps the harness and its
    version, and the compaction's time, and its audit is the source's."""
    path = _session(tmp_path, "2.0.76", [140_000, 154_000, 155_500], 155_979)
    out = tmp_path / "converted.jsonl"
    assert cli("convert", path, "-o", out, "-q").exit_code == 0
    source, converted = _row(path), _row(str(out))
    assert converted == source and source["threshold"] == 155_000 and source["time"] == "2026-11-28T10:00:00Z"
    r = cli("inspect", "--compactions", out)
    assert r.exit_code == 0 and "(anthropic, converted from claude-code, 2.0.76): window 200,000" in r.stdout, r.stdout


PI_SESSION = Path(__file__).parent / "transcripts" / "data" / "pi" / "built-tree-compaction.jsonl"


@pytest.mark.parametrize("model, window", [("claude-sonnet-4-5", 200_000), ("gpt-5", 400_000)])
def test_a_pi_compaction_and_the_pi_preset_name_one_trigger_on_the_sessions_window(cli, tmp_path, model, window):
    """Pi compacts past its model's window less compaction.reserveTokens (16,384 by default): the
    audit holds a Pi session's compaction to that on the session's window (genai-prices' for its
    model) and the pi preset compacts the same session there, by default and with a reserve given
    as the audit's --setting and the preset's summary.trigger_reserve; on another harness's
    recording, the preset's rule is taken of 200,000. (Before, the preset compacted every session
    at 183,616, and the audit knew no rule of Pi's.)"""
    from bisect import bisect_left

    from compactlab import load_policy, replay

    path = tmp_path / "pi.jsonl"
    path.write_text(PI_SESSION.read_text().replace('"claude-sonnet-4-5"', f'"{model}"'))
    t = load_transcript(str(path))
    doc = json.loads(cli("inspect", "--compactions", path, "--format", "json").stdout)
    [row] = doc["sessions"][0]["compactions"]
    assert (row["window"], row["threshold"]) == (window, window - 16_384)
    assert row["threshold_source"] == f"{window:,} - 16,384 (Pi's default compaction.reserveTokens 16,384) = " \
                                      f"{window - 16_384:,}"
    run = replay(t, load_policy("pi"))
    assert run.summary.summary_trigger == row["threshold"]
    assert run.summary.summary_trigger_source.startswith(f"{window - 16_384:,} tokens: Pi's own on the recording's window")
    # a reserve that puts the trigger at 3,700: the compaction at 3,800 fired where Pi's fires (the
    # check before measured 3,460), and the preset, given the same reserve, compacts at that call
    reserve = window - 3_700
    doc = json.loads(cli("inspect", "--compactions", path, "--setting", f"compaction.reserveTokens={reserve}",
                         "--format", "json").stdout)
    [row] = doc["sessions"][0]["compactions"]
    assert row["threshold"] == 3_700 and row["threshold_source"].endswith("(--setting)")
    assert row["fired"] == "where the automatic one fires: the first check past 3,700 (or a /compact you typed there)"
    run = replay(t, load_policy("pi", [f"summary.trigger_reserve={reserve}"]))
    fired = [e.call for e in run.events if "summary" in e.layers]
    assert run.summary.summary_trigger == 3_700 and fired[:1] == [row["call"]] == [bisect_left(t.call_positions, 8)]
    off = json.loads(cli("inspect", "--compactions", path, "--setting", "compaction.enabled=false", "--format",
                         "json").stdout)["sessions"][0]["compactions"][0]
    assert off["threshold"] is None and off["fired"].startswith("off, so a /compact you typed")
    other = replay(load_transcript(str(Path(__file__).parent.parent / "sample_transcripts" / "synth-small.jsonl")),
                   load_policy("pi", ["summary.trigger_reserve=30000"]))
    assert other.summary.summary_trigger == 170_000 and "rule on 200,000" in other.summary.summary_trigger_source


def test_an_opencode_compaction_and_the_opencode_preset_name_one_trigger(cli, tmp_path):
    """OpenCode compacts past its model's window less the reply's 32,000 less compaction.reserved:
    the audit holds the compaction OpenCode asked for itself to that, and the opencode preset's
    trigger on the same session is the same figure, by default and with a reserve given."""
    from compactlab import load_policy, replay
    from transcripts.test_opencode import build_store

    session = f"{build_store(tmp_path / 'opencode.db')}#ses_main"
    t = load_transcript(session)
    for given, reserve in (((), 0), (("--setting", "compaction.reserved=20000"), 20_000)):
        doc = json.loads(cli("inspect", "--compactions", session, *given, "--format", "json").stdout)
        [row] = doc["sessions"][0]["compactions"]
        assert row["trigger"] == "auto" and row["threshold"] == 200_000 - 32_000 - reserve, row
        run = replay(t, load_policy("opencode", [f"summary.trigger_reserve={reserve}"]))
        assert run.summary.summary_trigger == row["threshold"] and "OpenCode's own" in run.summary.summary_trigger_source
    assert row["fired"] == "fired at 5,390, before 148,000: the settings given are not the ones it ran with", row


def _held_to_a_file(cli, session, key: str, value: str, source: str, threshold: int) -> None:
    """``inspect --compactions`` of ``session``: its one compaction held to ``threshold``, from the
    setting ``key`` = ``value`` read from ``source`` alone."""
    doc = json.loads(cli("inspect", "--compactions", session, "--format", "json").stdout)
    [row] = doc["sessions"][0]["compactions"]
    assert doc["sessions"][0]["settings"] == {key: {"value": value, "source": source}}
    assert row["threshold"] == threshold and row["threshold_source"].endswith(f"({source})")


def test_pis_settings_are_read_from_its_files_as_pi_reads_them(cli, tmp_path, monkeypatch):
    """Pi's compaction settings: ``~/.pi/agent/settings.json`` (or ``$PI_CODING_AGENT_DIR``'s), and a
    project's ``.pi/settings.json`` over it, each said with its source: the audit holds the
    session's compaction to the reserve they give, tune's base and the replay's note read the
    same, and a reserve Pi's default or auto-compaction off are said so."""
    from compactlab.corpus.harness_settings import Setting, current

    home = tmp_path / "home"
    (home / ".pi" / "agent").mkdir(parents=True)
    (home / ".pi" / "agent" / "settings.json").write_text('{"compaction": {"reserveTokens": 30000}, "theme": "dark"}')
    monkeypatch.setenv("HOME", str(home))
    path = tmp_path / "pi.jsonl"
    path.write_text(PI_SESSION.read_text().replace('"claude-sonnet-4-5"', '"gpt-5"'))
    _held_to_a_file(cli, path, "compaction.reserveTokens", "30000", "~/.pi/agent/settings.json", 370_000)
    r = cli("replay", path, "-p", "pi", "--out", tmp_path / "r")
    assert ("note: pi is Pi's default, and you set compaction.reserveTokens = 30000 (~/.pi/agent/settings.json): "
            "that many tokens off each session's window (170,000 of 200,000); -p pi --set summary.trigger_reserve=30000 "
            "replays yours (tune --harness pi starts from it)") in \
        " ".join(r.stderr.split()), r.stderr
    # a project's own file over the user's, where the session was started in a folder here
    project = tmp_path / "proj"
    (project / ".pi").mkdir(parents=True)
    (project / ".pi" / "settings.json").write_text('{"compaction": {"enabled": false}}')
    settings = settings_for([], env={"HOME": str(home)}, home=str(home), project=str(project), project_of="pi")
    assert settings["compaction.enabled"] == Setting("false", str(project / ".pi" / "settings.json"))
    assert current("pi", settings)[0] == ["summary.enabled=false"]
    moved = tmp_path / "agent"
    moved.mkdir()
    (moved / "settings.json").write_text('{"compaction": {"reserveTokens": 16384}}')
    elsewhere = settings_for([], env={"HOME": str(home), "PI_CODING_AGENT_DIR": str(moved)}, home=str(home),
                             harness="pi")
    assert current("pi", elsewhere) == ([], f"compaction.reserveTokens = 16384 ({moved / 'settings.json'}): the "
                                            "default")
    (home / ".pi" / "agent" / "settings.json").write_text("[1]")
    bad = cli("inspect", "--compactions", path)
    assert bad.exit_code == 2 and "settings.json: not a settings file compactlab can read" in bad.stderr, bad.stderr


def test_opencodes_config_is_read_as_opencode_reads_it(cli, tmp_path, monkeypatch):
    """OpenCode's compaction settings: its global config (``$XDG_CONFIG_HOME/opencode/opencode.json``,
    ``~/.config`` by default), ``$OPENCODE_CONFIG`` over it, a project's ``opencode.json`` over both,
    each said with its source: the audit holds OpenCode's own compaction to the reserve they give,
    and a replay of the preset says yours."""
    from compactlab.corpus.harness_settings import current
    from transcripts.test_opencode import build_store

    home = tmp_path / "home"
    (home / ".config" / "opencode").mkdir(parents=True)
    (home / ".config" / "opencode" / "opencode.json").write_text(  # (comments and a trailing comma, as OpenCode takes)
        '{"$schema": "https://opencode.ai/config.json", // the schema\n'
        ' "compaction": {"reserved": 20000, /* tokens */ "prune": true,},}')
    monkeypatch.setenv("HOME", str(home))  # (PI_CODING_AGENT_DIR, OPENCODE_CONFIG, XDG_CONFIG_HOME: conftest's)
    session = f"{build_store(tmp_path / 'opencode.db')}#ses_main"
    _held_to_a_file(cli, session, "compaction.reserved", "20000", "~/.config/opencode/opencode.json", 148_000)
    r = cli("replay", session, "-p", "opencode", "--out", tmp_path / "r")
    # (the preset's reserve, 0, is not the current OpenCode's default, min(20,000, the max output): not said to be)
    assert ("note: opencode is OpenCode with the preset's own settings, and you set compaction.reserved = 20000 "
            "(~/.config/opencode/opencode.json): that many tokens off each session's window (148,000 of 200,000); -p "
            "opencode --set summary.trigger_reserve=20000 replays yours") in " ".join(r.stderr.split()), r.stderr
    custom = tmp_path / "custom.json"
    custom.write_text('{"compaction": {"auto": false}}')
    mine = settings_for([], env={"HOME": str(home), "OPENCODE_CONFIG": str(custom)}, home=str(home), harness="opencode")
    assert current("opencode", mine) == (["summary.enabled=false"], f"compaction.auto = false ({custom}): "
                                                                    "auto-compaction off")
    project = tmp_path / "proj"
    project.mkdir()
    (project / "opencode.jsonc").write_text('{"compaction": {"reserved": 40000}} // mine')
    theirs = settings_for([], env={"HOME": str(home), "OPENCODE_CONFIG": str(custom)}, home=str(home),
                          project=str(project), project_of="opencode")
    assert theirs["compaction.reserved"].value == "40000" and "compaction.auto" in theirs  # (both read, the project's first)


def test_a_broken_settings_file_is_its_own_harnesss_sessions_error_alone(cli, tmp_path, monkeypatch):
    """The audit reads a session's own harness's settings: a broken file of another harness (a
    ``~/.pi/agent/settings.json`` that is no JSON object) no longer fails the audit of a goose
    session; it is the error of a Pi session's audit, and among several sessions that one is
    skipped with its reason while the others are audited."""
    from helpers import goose_store

    home = tmp_path / "home"
    (home / ".pi" / "agent").mkdir(parents=True)
    (home / ".pi" / "agent" / "settings.json").write_text("[1")
    monkeypatch.setenv("HOME", str(home))
    goose = f"{goose_store(tmp_path / 'sessions.db')}#20251122_1"
    ok = cli("inspect", "--compactions", goose, "--format", "json")
    assert ok.exit_code == 0, ok.stderr
    assert json.loads(ok.stdout)["sessions"][0]["compactions"][0]["threshold"] == 160_000
    pi = tmp_path / "pi.jsonl"
    pi.write_text(PI_SESSION.read_text())
    bad = cli("inspect", "--compactions", pi)
    assert bad.exit_code == 2 and "settings.json: not a settings file compactlab can read" in bad.stderr, bad.stderr
    both = cli("inspect", "--compactions", goose, pi, "--format", "json")
    assert both.exit_code == 0 and f"skipped {pi}: " in both.stderr, both.stderr
    assert [s["format"] for s in json.loads(both.stdout)["sessions"]] == ["goose"]
    wrong = cli("inspect", "--compactions", goose, "--setting", "compaction.reserveTokens")
    assert wrong.exit_code == 2 and "not KEY=VALUE of a setting compactlab reads" in wrong.stderr

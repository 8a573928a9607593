"""Your sessions with no path to type (#47 §1, §2): the harnesses' homes in a temporary HOME, their
filters, and many paths (globs a shell did not expand, files that are no transcript) taken alike."""

from __future__ import annotations

import json
import os
import time

import orjson
import pytest

from compactlab.transcripts.homes import find, looked, when
from helpers import SAMPLES, ClaudeCodeSession


def _codex(path, cwd: str) -> None:
    def item(payload):
        return {"timestamp": "2026-11-27T10:00:00.000Z", "type": "response_item", "payload": payload}

    lines = [{"timestamp": "t", "type": "session_meta", "payload": {"id": "s1", "cwd": cwd}},
             {"timestamp": "t", "type": "turn_context", "payload": {"model": "gpt-5.3-codex"}},
             item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list it"}]}),
             item({"type": "function_call", "name": "shell", "arguments": "{\"cmd\": \"ls\"}", "call_id": "c1"}),
             item({"type": "function_call_output", "call_id": "c1", "output": "a.py"}),
             item({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]})]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A HOME holding a Claude Code, a Codex, a Gemini CLI and a Cline session (and a Gemini log,
    which is no transcript); the Codex one last written ten days ago."""
    h = tmp_path / "home"
    s = ClaudeCodeSession().user("go").assistant("a1", {"type": "tool_use", "id": "t1", "name": "Bash",
                                                        "input": {"command": "ls"}}).result("t1", "a.py")
    s.assistant("a2", {"type": "text", "text": "done"})
    project = h / ".claude" / "projects" / "-home-me-webshop"
    project.mkdir(parents=True)
    s.write(project / "s1.jsonl")
    rollout = h / ".codex" / "sessions" / "2026" / "11" / "17" / "rollout-2026-11-17T10-00-00-abc.jsonl"
    _codex(rollout, "/home/me/billing")
    old = time.time() - 10 * 86400
    os.utime(rollout, (old, old))
    chats = h / ".gemini" / "tmp" / "ab12" / "chats"
    chats.mkdir(parents=True)
    doc = {"sessionId": "g1", "projectHash": "ab12", "startTime": "2026-11-27T00:00:00Z",
           "lastUpdated": "2026-11-27T00:00:00Z",
           "messages": [{"id": "u1", "timestamp": "2026-11-27T00:00:01Z", "type": "user", "content": "hi"},
                        {"id": "g1", "timestamp": "2026-11-27T00:00:02Z", "type": "gemini", "content": "hello",
                         "tokens": {"input": 10, "output": 2, "cached": 0, "total": 12}, "model": "gemini-3-flash"}]}
    (chats / "session-2026-11-27.json").write_text(json.dumps(doc))
    (chats.parent / "logs.json").write_text("[]")
    task = h / ".config" / "Code" / "User" / "globalStorage" / "saoudrizwan.claude-dev" / "tasks" / "1767225600000"
    task.mkdir(parents=True)
    (task / "api_conversation_history.json").write_text(json.dumps(
        [{"role": "user", "content": [{"type": "text", "text": "fix"}]},
         {"role": "assistant", "content": [{"type": "text", "text": "fixed"}]}]))
    monkeypatch.setenv("HOME", str(h))
    for v in ("CLAUDE_CONFIG_DIR", "CODEX_HOME"):
        monkeypatch.delenv(v, raising=False)
    return h


def test_inspect_with_no_path_lists_the_sessions_of_every_harness(cli, home):
    r = cli("inspect", "--format", "json")
    assert r.exit_code == 0, r.stderr
    formats = sorted(s["format"] for s in json.loads(r.stdout)["sessions"])
    assert formats == ["claude-code", "cline", "codex", "gemini-cli"]
    assert "sessions found: 4, in ~/.claude/projects (claude-code): 1; ~/.codex/sessions (codex): 1; " \
           "~/.gemini/tmp (gemini-cli): 1" in r.stderr
    assert "(cline): 1" in r.stderr


@pytest.mark.parametrize("args, formats", [
    (("--harness", "codex"), ["codex"]),
    (("--project", "webshop"), ["claude-code"]),
    (("--project", "BILLING"), ["codex"]),  # (a Codex session's project: the working folder it recorded)
    (("--since", "7d"), ["claude-code", "cline", "gemini-cli"]),
    (("--until", "7d"), ["codex"]),
])
def test_the_filters(cli, home, args, formats):
    r = cli("inspect", *args, "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert sorted(s["format"] for s in json.loads(r.stdout)["sessions"]) == formats


def test_the_homes_the_environment_names(home, tmp_path, monkeypatch):
    other = tmp_path / "elsewhere"
    (other / "projects" / "p").mkdir(parents=True)
    (other / "projects" / "p" / "s.jsonl").write_bytes((home / ".claude" / "projects" / "-home-me-webshop" /
                                                        "s1.jsonl").read_bytes())
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", f"{other}, {tmp_path / 'missing'}")
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "no-codex"))
    found = {h.harness: h for h in find()}
    assert found["claude-code"].path == str(other / "projects") and "codex" not in found
    assert "sessions found: 3" in looked(find())


def test_no_sessions_and_bad_filters_are_said(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    r = cli("compare", "--dry-run")
    assert r.exit_code == 2 and "error: no sessions to read: no harness's home is on this machine" in r.stderr
    assert "hint: give a session file or folder: compactlab compare session.jsonl" in r.stderr  # (the command run)
    assert cli("inspect", "--since", "soon").exit_code == 2
    # (--harness codex where ~/.claude/projects is and ~/.codex is not: it said "none of the harnesses'
    # homes is on this machine", listing every home but codex's own; now the one asked for is named)
    (tmp_path / ".claude" / "projects").mkdir(parents=True)
    for v in ("CLAUDE_CONFIG_DIR", "CODEX_HOME"):
        monkeypatch.delenv(v, raising=False)
    r = cli("inspect", "--harness", "codex")
    assert r.exit_code == 2 and r.stderr.startswith("no sessions: codex's home is not on this machine "
                                                     "(~/.codex/sessions)\n"), r.stderr
    assert "error: no sessions to read: codex's home is not on this machine\n" in r.stderr  # (not "with these filters")
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "elsewhere"))
    assert "(~/elsewhere/sessions)" in cli("inspect", "--harness", "codex").stderr  # (where CODEX_HOME puts it)
    many = cli("inspect", "--harness", "cline").stderr.splitlines()[0]  # (an extension's folders: the first three)
    assert many.startswith("no sessions: cline's home is not on this machine (~/.config/Code/") and " more)" in many
    assert "sessions found: 0, in ~/.claude/projects (claude-code): 0" in cli("inspect").stderr
    bad = cli("replay", SAMPLES / "synth-small.jsonl", "--project", "x", "--dry-run")
    assert bad.exit_code == 2 and "--project and --harness choose among the sessions found without a path" in bad.stderr
    assert when("2d", "--since", now=1_000_000.0) == 1_000_000.0 - 2 * 86400
    # (#56 §6) each unit its own: 12h is half a day, not 12 days
    assert [1_000_000.0 - when(t, "--since", now=1_000_000.0) for t in ("12h", "30m", "2w", "1d")] == [
        12 * 3600, 30 * 60, 14 * 86400, 86400]


def test_where_no_home_is_the_line_names_each_as_the_environment_places_it():
    """The line for no home at all was written out once, whatever the environment said: with
    CODEX_HOME set it still named ~/.codex/sessions. It is now made from ``places``, as --harness's is."""
    plain = looked([], {"HOME": "/home/me"})
    assert plain.startswith("no sessions: none of the harnesses' homes is on this machine (~/.claude/projects, "
                            "~/.codex/sessions, ~/.gemini/tmp, the Cline/Roo/Kilo task folders, ")
    assert "~/.config/claude" not in plain and "Library" not in plain  # (each harness once: its shortest home)
    assert "~/.local/share/goose/sessions" in plain and plain.count("goose") == 1
    moved = looked([], {"HOME": "/home/me", "CODEX_HOME": "/data/codex", "CLAUDE_CONFIG_DIR": "/home/me/cc"})
    assert "(~/cc/projects, /data/codex/sessions, " in moved and "~/.codex" not in moved and "~/.claude" not in moved


def test_a_home_that_names_no_user_is_a_one_line_error(cli, tmp_path, monkeypatch):
    """(#56 §6) CLAUDE_CONFIG_DIR='~nouser/x' was an internal error (Could not determine home directory)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    for variable in ("CLAUDE_CONFIG_DIR", "CODEX_HOME"):
        monkeypatch.setenv(variable, "~no-such-user-here/x")
        r = cli("inspect")
        assert r.exit_code == 2 and f"{variable}=~no-such-user-here/x: ~no-such-user-here names no user" in r.stderr, \
            r.stderr
        monkeypatch.delenv(variable)


def test_replay_and_check_read_the_sessions_found(cli, home, tmp_path):
    r = cli("replay", "--harness", "claude-code", "--dry-run", "-p", "none")
    assert r.exit_code == 0, r.stderr
    baseline = tmp_path / "b.json"
    assert cli("check", "--since", "7d", "--baseline", baseline, "--update-baseline", "-q").exit_code == 0
    assert len(json.loads(baseline.read_text())["records"]) >= 3


def test_next_action_reads_the_sessions_found_as_every_job_does(cli, home):
    """next-action alone required its paths: ``next-action --harness claude-code`` was "No such option"
    where replay, compare, check, inspect and tune take it. Every command that reads transcripts
    takes the same ways of finding them with no path."""
    from compactlab.cli import main

    r = cli("next-action", "--harness", "claude-code", "--dry-run", "-p", "s08", "--samples", "2")
    assert r.exit_code == 0, r.stderr
    assert r.stderr.startswith("sessions found: 1, in ~/.claude/projects (claude-code): 1"), r.stderr
    import click

    ctx = click.Context(main)
    commands = {name: main.get_command(ctx, name) for name in main.list_commands(ctx)}
    reading = {name: cmd for name, cmd in commands.items()
               if cmd is not None and any(p.name == "transcripts" for p in cmd.params)}
    assert {"replay", "compare", "check", "inspect", "tune", "next-action"} <= set(reading)
    for name, cmd in reading.items():
        options = {p.name for p in cmd.params}
        if name != "convert":  # (convert writes one file from one transcript: it names it)
            assert {"harness", "project", "since", "until", "subagents"} <= options, name


def test_a_wrong_option_of_tune_is_said_before_any_session_is_looked_for(cli, home):
    """``tune --harness claude-code --space …`` said "sessions found: …" and the subagents left out
    before its error about the options: the options are checked first."""
    r = cli("tune", "--harness", "claude-code", "--space", "summary.trigger=1000:2000")
    assert r.exit_code == 2 and r.stderr.startswith("error: --harness claude-code: searches the settings"), r.stderr


def test_a_harness_home_given_as_a_folder_names_the_folder_of_its_sessions(cli, home, tmp_path):
    """``compactlab inspect ~/.codex`` (or ``~/.claude``) said "a folder with no transcript files" and
    no more: its sessions are in a folder of it, deeper than a folder is read. The hint names it."""
    h = tmp_path / "home"
    for given, harness, inside in ((h / ".codex", "codex", h / ".codex" / "sessions"),
                                   (h / ".claude", "claude-code", h / ".claude" / "projects")):
        r = cli("inspect", given)
        assert r.exit_code == 2 and "a folder with no transcript files" in r.stderr, r.stderr
        assert f"hint: {harness}'s sessions are in {inside}: give that folder, or no path (--harness {harness})" \
            in r.stderr, r.stderr
        assert cli("inspect", inside).exit_code == 0
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "hint:" not in cli("inspect", empty).stderr  # (a folder that holds no harness's home: no hint)


def test_with_no_path_subagents_are_left_out_and_said_or_read_with_subagents(cli, home):
    """(#55 §5) The subagents of a session (<project>/<session>/subagents/agent-*.jsonl) with no
    path, as the folder form: left out and said with what they cost, read with --subagents."""
    project = home / ".claude" / "projects" / "-home-me-webshop"
    agents = project / "s1" / "subagents"
    agents.mkdir(parents=True)
    for name in ("agent-a1.jsonl", "agent-b2.jsonl"):
        (agents / name).write_bytes((project / "s1.jsonl").read_bytes())
    r = cli("inspect", "--harness", "claude-code", "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert len(json.loads(r.stdout)["sessions"]) == 1
    assert "left out 2 subagent session(s) of your sessions" in r.stderr and "--subagents includes them" in r.stderr
    folder = cli("inspect", project, "--format", "json")
    assert "left out 2 subagent session(s) of the folder(s)" in folder.stderr
    r = cli("inspect", "--harness", "claude-code", "--subagents", "--format", "json")
    assert r.exit_code == 0 and len(json.loads(r.stdout)["sessions"]) == 3, r.stderr
    assert "left out" not in r.stderr
    assert len(json.loads(cli("inspect", project, "--subagents", "--format", "json").stdout)["sessions"]) == 3


def test_many_paths_globs_and_a_file_that_is_no_transcript(cli, tmp_path, monkeypatch):
    """(#47 §2) inspect takes many paths, a glob no shell expanded, and skips (counts) what is not a
    transcript, as replay and compare do."""
    monkeypatch.chdir(SAMPLES.parent)
    r = cli("inspect", "sample_transcripts/synth-s*.jsonl", "sample_transcripts/README.md", "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert [os.path.basename(s["transcript"]) for s in json.loads(r.stdout)["sessions"]] == ["synth-small.jsonl"]
    assert "skipped 1 file(s) that are not transcripts in a known format (each with -v)" in r.stderr
    assert "README.md" not in r.stderr
    said = cli("inspect", "sample_transcripts/synth-s*.jsonl", "sample_transcripts/README.md", "--format", "json", "-v")
    assert said.exit_code == 0 and "skipped sample_transcripts/README.md: " in said.stderr, said.stderr  # (what -v says)
    for command in (("replay", "--dry-run", "-q"), ("compare", "--dry-run", "-q", "--charts", "none")):
        done = cli(command[0], "sample_transcripts/manual-*.jsonl", "sample_transcripts/README.md", *command[1:])
        assert done.exit_code == 0, done.stderr
    missing = cli("inspect", "nothing/*.jsonl")
    assert missing.exit_code == 2 and "no file matches" in missing.stderr

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from helpers import ROOT, SAMPLES, tool_session, write_jsonl

SMALL = SAMPLES / "synth-small.jsonl"


def test_version_and_help(cli):
    assert cli("--version").output.startswith("compactlab, version ")
    out = cli("--help").output
    for cmd in ("replay", "inspect", "policies", "synth"):
        assert cmd in out


def test_replay_json_is_one_object_with_one_record_per_call(cli, tmp_path):
    r = cli("replay", SMALL, "--format", "json", "--out", tmp_path / "o")
    assert r.exit_code == 0, r.output
    (doc,) = json.loads(r.stdout)["runs"]  # one shape for any number of inputs
    assert set(doc) == {"summary", "calls", "timing"} and "runtime_s" not in doc["summary"]
    n_assistant = sum(1 for line in SMALL.read_text().splitlines() if json.loads(line)["role"] == "assistant")
    assert len(doc["calls"]) == doc["summary"]["calls"] == n_assistant == 30
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["summary"]["calls"] == 30 and summary["policy"]["name"] == "s08"
    rows = list(csv.DictReader(io.StringIO((tmp_path / "o" / "calls.csv").read_text())))
    assert len(rows) == 30 and rows[0]["call"] == "0"


def test_replay_default_table_and_default_out_folder(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = cli("replay", SMALL)
    assert r.exit_code == 0
    assert "reduction" in r.stdout and "violations introduced" in r.stdout
    assert "context tokens per call" in r.stdout
    assert (tmp_path / "reports" / "synth-small-s08" / "summary.json").is_file()


def test_piped_tables_are_plain_aligned_text_and_need_no_rich(tmp_path):
    """Into a pipe a table is one line a row: a long path is never wrapped or folded (grep finds
    it whole), columns line up, and rich is not even imported."""
    import subprocess
    import sys

    deep = tmp_path / ("a-rather-long-folder-name-" * 4) / "session.jsonl"
    deep.parent.mkdir(parents=True)
    deep.write_bytes(SMALL.read_bytes())
    code = ("import sys; from compactlab.cli import main\n"
            "try: main(sys.argv[1:])\n"
            "except SystemExit: pass\n"
            "print('rich imported' if any(m.startswith('rich') for m in sys.modules) else 'no rich')")
    out = subprocess.run([sys.executable, "-c", code, "replay", str(deep), "--dry-run"],
                         capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert lines[0] == f"{deep} × s08 ({lines[0].rsplit('(', 1)[1]}"  # the title, whole, on one line
    assert lines[-1] == "no rich"
    rows = [line for line in lines[1:] if line.startswith(("calls ", "reduction ", "retention "))]
    assert len(rows) == 3 and len({len(r) for r in rows}) == 1  # values right-aligned in one column
    assert not any(c in out for c in "│┃─━")


def test_table_plain_layout():
    from compactlab.reports.terminal import Table

    t = Table(title="2 runs")
    t.add_column("policy")
    t.add_column("saving", justify="right")
    t.add_row("s08", "+33.2%")
    t.add_row("observation-masking", "-1.0%", style="red")
    assert t.plain() == ("2 runs\n"
                         "policy               saving\n"
                         "-------------------  ------\n"
                         "s08                  +33.2%\n"
                         "observation-masking   -1.0%\n")


def test_a_plain_key_value_table_aligns_its_figures_and_starts_a_long_value_where_the_column_starts():
    """Piped, a long value (a path, a sentence) no longer pushes every figure of its column as far
    right as it ends: the figures are aligned among themselves, the long value starts with them."""
    from compactlab.reports.terminal import PLAIN_FIGURE, Table

    t = Table(show_header=False)
    t.add_column()
    t.add_column(justify="right")
    t.add_row("calls", "139")
    t.add_row("reduction", "49.0%")
    t.add_row("subagent file", "/a/" + "b" * PLAIN_FIGURE + "/agent.jsonl")
    t.add_row("tokens billed", "22,959,313 → 11,703,987")
    assert t.plain() == ("calls                              139\n"
                         "reduction                        49.0%\n"
                         f"subagent file  /a/{'b' * PLAIN_FIGURE}/agent.jsonl\n"
                         "tokens billed  22,959,313 → 11,703,987\n")
    wide = Table(show_header=False)  # (every value long: the column is as wide as the widest)
    wide.add_column()
    wide.add_column(justify="right")
    wide.add_row("a", "x" * (PLAIN_FIGURE + 2))
    wide.add_row("bb", "y" * (PLAIN_FIGURE + 1))
    assert wide.plain() == f"a   {'x' * (PLAIN_FIGURE + 2)}\nbb   {'y' * (PLAIN_FIGURE + 1)}\n"


def test_the_by_design_manual_orphan_is_explained(cli):
    out = cli("replay", SAMPLES / "manual-compact.jsonl", "--dry-run").stdout
    assert "call 7: a tool result without its call (orphan_tool_result" in out and "orphaned by design" in out
    assert "tool-pairing violation(s) the policy introduced (the API would reject those calls)" in out
    assert "orphaned by design" not in cli("replay", SAMPLES / "manual-compact.jsonl", "--dry-run", "-p", "s20").stdout


def test_replay_csv_and_md(cli, tmp_path):
    r = cli("replay", SMALL, "--format", "csv", "--dry-run")
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert r.exit_code == 0 and len(rows) == 30 and "violations_introduced" in rows[0]
    md = cli("replay", SMALL, "--format", "md", "--dry-run", "-p", "s06").stdout
    assert md.startswith("# ") and "| reduction |" in md and "## Calls" in md


def test_dry_run_writes_nothing(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = cli("replay", SAMPLES / "huge-batch.jsonl", "--dry-run", "--write-transcripts")
    assert r.exit_code == 0 and list(tmp_path.iterdir()) == []


def test_write_transcripts_and_persisted_files(cli, tmp_path):
    out = tmp_path / "o"
    r = cli("replay", SAMPLES / "huge-batch.jsonl", "--out", out, "--write-transcripts", "--format", "json")
    s = json.loads(r.stdout)["runs"][0]["summary"]
    assert [p.name for p in (out / "tool-results").iterdir()] == ["toolu_hb_4.txt"]
    assert s["saved_transcripts"][0]["path"] and (out / s["saved_transcripts"][0]["path"]).is_file()


def test_inspect_json(cli):
    r = cli("inspect", SAMPLES / "recorded-orphan.jsonl", "--format", "json")
    info = json.loads(r.stdout)
    assert r.exit_code == 0
    for key in ("format", "messages", "calls", "tools", "violations", "skipped_lines", "unanswered_at_end"):
        assert key in info
    assert info["calls"] == 4 and info["tools"]["bash"]["count"] == 1
    assert [v["kind"] for v in info["violations"]] == ["orphan_tool_result"]
    table = cli("inspect", SAMPLES / "synth-small.jsonl").stdout
    assert "largest tool results" in table and "read_file" in table


def test_inspect_and_replay_name_every_model_a_session_switched_between(cli, tmp_path):
    """inspect named one model of a session that switched: its first reply's (Gemini CLI) or its
    last's (every other format), 5 calls of one model shown as the other's. It names each, with its
    calls, most used first."""
    rows = [{"role": "user", "content": "go"}]
    for k, model in enumerate(["claude-sonnet-4-5"] * 3 + ["claude-opus-4-5"]):
        rows += [{"type": "message", "role": "assistant", "model": model, "content": f"step {k}",
                  "usage": {"input_tokens": 100 + k, "output_tokens": 5}}, {"role": "user", "content": "next"}]
    path = write_jsonl(tmp_path / "switched.jsonl", rows[:-1])
    info = json.loads(cli("inspect", path, "--format", "json").stdout)
    assert info["model"] == "claude-opus-4-5" and info["models"] == {"claude-sonnet-4-5": 3, "claude-opus-4-5": 1}
    table = cli("inspect", path).stdout
    assert "claude-sonnet-4-5 (3 calls), claude-opus-4-5 (1 call)" in table
    assert not any(line.startswith("model ") for line in table.splitlines())
    one = json.loads(cli("inspect", SAMPLES / "synth-small.jsonl", "--format", "json").stdout)
    assert len(one["models"]) <= 1
    # (and replay's "priced by" says each call was priced at its own model, not at the last one's)
    s = json.loads(cli("replay", path, "--dry-run", "--format", "json").stdout)["runs"][0]["summary"]
    assert s["priced_by"].startswith("each call at its model's prices in ")
    assert s["priced_by"].endswith("(claude-sonnet-4-5, claude-opus-4-5)")
    forced = json.loads(cli("replay", path, "--dry-run", "--format", "json", "--price-model", "claude-opus-4-5").stdout)
    assert forced["runs"][0]["summary"]["priced_by"].startswith("claude-opus-4-5's in ")


def test_inspect_unanswered_at_end(cli, tmp_path):
    msgs = tool_session(2)
    msgs.append({"role": "assistant", "content": [{"type": "tool_use", "id": "last", "name": "submit", "input": {}}]})
    info = json.loads(cli("inspect", write_jsonl(tmp_path / "t.jsonl", msgs), "--format", "json").stdout)
    assert info["unanswered_at_end"] == ["last"] and info["violations"] == []


def test_policies_list_and_show(cli):
    out = cli("policies", "list").stdout
    for name in ("none", "s06", "s06-article", "s08", "s08-readme", "s20"):
        assert name in out
    shown = cli("policies", "show", "s08", "--set", "summary.trigger=1234").stdout
    assert "trigger = 1234" in shown and shown.startswith("# fingerprint ")
    import tomllib

    assert tomllib.loads(shown)["summary"]["trigger"] == 1234
    doc = json.loads(cli("policies", "show", "s06", "--format", "json").stdout)
    assert doc["name"] == "s06" and len(doc["fingerprint"]) == 12


def test_synth_is_deterministic(cli, tmp_path):
    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    assert cli("synth", "-o", a, "--calls", "40", "--seed", "3").exit_code == 0
    cli("synth", "-o", b, "--calls", "40", "--seed", "3", "-q")
    cli("synth", "-o", c, "--calls", "40", "--seed", "4", "-q")
    assert a.read_bytes() == b.read_bytes() != c.read_bytes()
    d = tmp_path / "d.jsonl"
    assert cli("synth", "-o", d, "--calls", "40", "--seed", "3", "--usage", "-q").exit_code == 0
    replies = [json.loads(line) for line in d.read_text().splitlines() if '"assistant"' in line]
    assert len(replies) == 40 and all(r["type"] == "message" and r["usage"]["output_tokens"] > 0 for r in replies)


@pytest.mark.parametrize("args,message", [
    (["replay", "missing.jsonl"], "missing.jsonl: no such file"),
    (["replay", ROOT / "compactlab"], "a folder with no transcript files"),
    (["replay", SMALL, "-p", "nope"], "unknown policy 'nope'"),
    (["replay", SMALL, "--set", "snip.keep_head=99"], "keep_head (99) must be smaller"),
    (["replay", SMALL, "--set", "nonsense"], "expected KEY=VALUE"),
    (["inspect", "missing.jsonl"], "no such file"),
    (["policies", "show", "nope"], "unknown policy"),
])
def test_errors_are_one_line_exit_2(cli, args, message):
    r = cli(*args)
    assert r.exit_code == 2
    assert r.stderr.startswith("error: ") and message in r.stderr.splitlines()[0]
    assert "Traceback" not in r.output + r.stderr


def test_bad_line_and_skip_bad_lines(cli, tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_bytes(SMALL.read_bytes().replace(b"\n", b"\n{broken\n", 1))
    r = cli("replay", p, "--dry-run")
    assert r.exit_code == 2 and r.stderr.startswith(f"error: {p}:2: invalid JSON")
    assert "hint: use --skip-bad-lines" in r.stderr
    ok = cli("replay", p, "--dry-run", "--skip-bad-lines", "--format", "json")
    assert ok.exit_code == 0 and json.loads(ok.stdout)["runs"][0]["summary"]["skipped_lines"] == 1
    assert "skipped 1 bad line" in ok.stderr
    quiet = cli("replay", p, "--dry-run", "--skip-bad-lines", "--format", "json", "--quiet")
    assert quiet.stderr == ""


def test_out_that_is_a_file(cli, tmp_path):
    f = tmp_path / "f"
    f.write_text("x")
    r = cli("replay", SMALL, "--out", f)
    assert r.exit_code == 2 and "exists and is not a folder" in r.stderr


def test_bad_usage_is_exit_2(cli, tmp_path, monkeypatch):
    assert cli("replay", SMALL, "--format", "xml").exit_code == 2
    monkeypatch.setenv("HOME", str(tmp_path))  # (no path, and no sessions at home)
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    r = cli("replay")
    assert r.exit_code == 2 and "no sessions to read" in r.stderr


def test_a_terminal_gets_rich_boxes_or_a_compact_layout_never_a_row_wrapped_mid_word(monkeypatch):
    """rich squeezes a table wider than the terminal until whole columns vanish, and a plain
    table wider than the terminal wraps mid-word (#18 §3): a narrow terminal gets the essential
    columns boxed, or, narrower still, each row as lines; a pipe keeps every column, plain."""
    from compactlab.reports.terminal import Printer, Table

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    def wide() -> Table:
        t = Table(title="wide")
        t.add_column("transcript", overflow="fold", min_width=12)
        for col in ("tokens saved", "cost raw → policy", "cost saving", "retention", "summaries", "overflows",
                    "violations"):
            t.add_column(col, essential=col in ("cost saving", "retention"), justify="right", no_wrap=True)
        t.add_row("session.jsonl", "81.4%", "$0.28 → $0.18", "+34.4%", "20.0%", "0", "0", "0")
        return t

    monkeypatch.setenv("COLUMNS", "160")
    out = Terminal()
    Printer(out).table(wide())
    assert "│" in out.getvalue() and "summaries" in out.getvalue()
    import re

    shown = lambda out: re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())  # noqa: E731 - what the eye sees
    monkeypatch.setenv("COLUMNS", "60")
    out = Terminal()
    Printer(out).table(wide())
    text = shown(out)
    assert "│" in text and "cost saving" in text and "summaries" not in text and "session.jsonl" in text
    assert max(len(line) for line in text.splitlines()) <= 60
    monkeypatch.setenv("COLUMNS", "30")
    out = Terminal()
    Printer(out).table(wide())
    lines = shown(out).splitlines()
    # (each row as lines, its short values run together and broken between two of them at the width,
    # each line of them as indented as the first, no "·" left at a line's end)
    assert "session.jsonl" in lines and "  cost saving: +34.4%" in lines and "  retention: 20.0%" in lines
    assert not any(line.endswith("·") for line in lines)
    assert max(map(len, lines)) <= 30
    piped = io.StringIO()
    Printer(piped).table(wide())
    assert piped.getvalue() == wide().plain() and "summaries" in piped.getvalue()


def test_replay_output_has_one_shape_for_any_number_of_inputs(cli, tmp_path):
    """#18 §5: a folder of one session and one of two give the same JSON and CSV shape; the one
    run's object is there when asked for (--format json-run); timings stay out of the records."""
    two = [SMALL, SAMPLES / "huge-batch.jsonl"]
    one = json.loads(cli("replay", SMALL, "--format", "json", "--dry-run").stdout)
    both = json.loads(cli("replay", *two, "--format", "json", "--dry-run").stdout)
    assert list(one) == list(both) == ["runs"] and len(both["runs"]) == 2
    assert both["runs"][0]["summary"] == one["runs"][0]["summary"]
    assert both["runs"][0]["calls"] == one["runs"][0]["calls"]
    single = json.loads(cli("replay", SMALL, "--format", "json-run", "--dry-run").stdout)
    assert single["summary"] == one["runs"][0]["summary"]
    r = cli("replay", *two, "--format", "json-run", "--dry-run")
    assert r.exit_code == 2 and "--format json-run prints one run; 2 transcripts given" in r.stderr
    head_one = cli("replay", SMALL, "--format", "csv", "--dry-run").stdout.splitlines()[0]
    head_two = cli("replay", *two, "--format", "csv", "--dry-run").stdout.splitlines()[0]
    assert head_one == head_two and head_one.startswith("transcript,call,")


def test_replay_runs_one_policy_and_says_so_when_given_more(cli):
    r = cli("replay", SMALL, "-p", "s06", "-p", "s08", "--dry-run")
    assert r.exit_code == 2 and "replay runs one policy; 2 given (s06, s08)" in r.stderr
    assert "compactlab compare TRANSCRIPT -p s06 -p s08" in r.stderr


def test_options_can_be_set_from_the_environment(cli, monkeypatch):
    monkeypatch.setenv("COMPACTLAB_REPLAY_POLICY", "s06")
    monkeypatch.setenv("COMPACTLAB_REPLAY_FORMAT", "json")
    doc = json.loads(cli("replay", SMALL, "--dry-run", "-q").stdout)
    assert doc["runs"][0]["summary"]["policy"] == "s06"
    assert json.loads(cli("replay", SMALL, "-p", "s20", "--dry-run", "-q").stdout)["runs"][0]["summary"]["policy"] == "s20"
    monkeypatch.setenv("COMPACTLAB_COMPARE_POLICY", "none s06")  # a repeatable option: values split on spaces
    rows = json.loads(cli("compare", SMALL, "--dry-run", "--format", "json", "-q").stdout)["runs"]
    assert sorted(r["policy"] for r in rows) == ["none", "s06"]


def test_replay_reads_standard_input(tmp_path):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "compactlab", "replay", "-", "--format", "json", "--dry-run", "-q"],
                       stdin=SMALL.open("rb"), capture_output=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["runs"][0]["summary"]["calls"] == 30
    r = subprocess.run([sys.executable, "-m", "compactlab", "replay", "-", str(SMALL), "--dry-run"],
                       stdin=subprocess.DEVNULL, capture_output=True, cwd=tmp_path)
    assert r.returncode == 2 and b"- (standard input) must be the only transcript" in r.stderr
    # (an error or a warning of the input names it as given, not the private copy it was read from:
    # "error: /tmp/compactlab-stdin-ib968_9k/stdin:2: invalid JSON")
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"role": "user", "content": "hi"}\n{bad\n')
    for extra, said in (((), b"error: <stdin>:2: invalid JSON"), (("--skip-bad-lines",), b"<stdin>: skipped 1 bad")):
        r = subprocess.run([sys.executable, "-m", "compactlab", "replay", "-", "--dry-run", *extra],
                           stdin=bad.open("rb"), capture_output=True, cwd=tmp_path)
        assert said in r.stderr and b"compactlab-stdin-" not in r.stderr, r.stderr


def test_a_folder_of_project_folders_is_searched_one_level_down_and_subagents_are_asked_for(cli, tmp_path):
    """~/.claude/projects/ holds a folder per project; a session's subagents sit in
    <session>/subagents/ and are left out unless --subagents, with a word about them."""
    projects = tmp_path / "projects"
    for project, sessions in (("-home-me-app", ["a", "b"]), ("-home-me-lib", ["c"])):
        (projects / project).mkdir(parents=True)
        for name in sessions:
            write_jsonl(projects / project / f"{name}.jsonl", tool_session(2))
    (projects / "-home-me-app" / "a" / "subagents").mkdir(parents=True)
    write_jsonl(projects / "-home-me-app" / "a" / "subagents" / "agent-1.jsonl", tool_session(1))
    r = cli("inspect", projects, "--format", "json")
    assert r.exit_code == 0, r.output
    names = sorted(Path(s["transcript"]).name for s in json.loads(r.stdout)["sessions"])
    assert names == ["a.jsonl", "b.jsonl", "c.jsonl"] and "left out 1 subagent session(s)" in r.stderr
    with_agents = json.loads(cli("inspect", projects, "--format", "json", "--subagents").stdout)["sessions"]
    assert len(with_agents) == 4
    r = cli("replay", projects / "-home-me-app", "--dry-run", "--format", "json", "--subagents")
    assert r.exit_code == 0 and len(json.loads(r.stdout)["runs"]) == 3
    r = cli("compare", projects, "-p", "none", "--dry-run", "--format", "json", "-q")
    assert len(json.loads(r.stdout)["runs"]) == 3


def test_a_folder_whose_sessions_lie_deeper_than_one_level_is_named_not_silently_left_out(cli, tmp_path):
    """A folder of harnesses' folders (``transcripts/`` holding ``codex/`` and ``claude_code/``,
    which holds a folder per project) is read one level down: claude_code's sessions were left out
    and nothing said so ("18 session(s)"). The folder is now named, each with -v, with the ways to
    read it; a folder with sessions of its own, or whose folders hold none, is not."""
    root = tmp_path / "transcripts"
    (root / "codex").mkdir(parents=True)
    write_jsonl(root / "codex" / "a.jsonl", tool_session(2))
    (root / "claude_code" / "project").mkdir(parents=True)
    write_jsonl(root / "claude_code" / "project" / "b.jsonl", tool_session(2))
    (root / "empty" / "nothing").mkdir(parents=True)
    (root / "claude_code" / "subagents").mkdir()
    r = cli("inspect", root, "--format", "json")
    assert r.exit_code == 0, r.output
    assert [Path(s["transcript"]).name for s in json.loads(r.stdout)["sessions"]] == ["a.jsonl"]
    said = "left out 1 folder(s) whose sessions are a level deeper than compactlab reads (claude_code): give each as an"
    assert said in r.stderr and f"left out {root / 'claude_code'}:" not in r.stderr
    r = cli("inspect", root, "--format", "json", "-v")
    assert f"left out {root / 'claude_code'}: its sessions are in the folders inside it" in r.stderr
    r = cli("replay", root, "--dry-run", "--format", "json", "-q")
    assert r.exit_code == 0 and said not in r.stderr  # (--quiet: only what must be said)
    r = cli("compare", root, "-p", "none", "--dry-run", "--format", "json")
    assert said in r.stderr and len(json.loads(r.stdout)["runs"]) == 1
    # as the line says: the folder given, or a glob
    assert len(json.loads(cli("inspect", root / "claude_code", "--format", "json").stdout)["sessions"]) == 1
    r = cli("inspect", f"{root}/**/*.jsonl", "--format", "json")
    assert len(json.loads(r.stdout)["sessions"]) == 2 and "left out" not in r.stderr
    for given in (root / "codex", root / "claude_code"):  # (sessions of their own, or in the folders directly in them)
        assert "left out" not in cli("inspect", given, "--format", "json").stderr


def test_a_folders_session_that_records_no_usage_says_none_not_0_tokens(cli, tmp_path):
    """inspect DIR listed "rec. tokens 0" for a session whose recording keeps no usage (SWE-agent's,
    a trace without usage): 0 reads as a prompt of no tokens. It says none, and JSON null."""
    folder = tmp_path / "sessions"
    folder.mkdir()
    write_jsonl(folder / "plain.jsonl", tool_session(2))
    usage = {"input_tokens": 1200, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0, "output_tokens": 5}
    write_jsonl(folder / "used.jsonl", [{**m, "usage": usage} if m["role"] == "assistant" else m
                                        for m in tool_session(2)])
    rows = {Path(r["transcript"]).name: r for r in json.loads(cli("inspect", folder, "--format", "json").stdout)["sessions"]}
    assert rows["plain.jsonl"]["recorded_tokens"] is None and rows["used.jsonl"]["recorded_tokens"] > 0, rows
    table = cli("inspect", folder).stdout
    assert [line.split()[-2] for line in table.splitlines() if ".jsonl" in line] == ["none", "2,400"], table
    md = cli("inspect", folder, "--format", "md").stdout
    assert "| none | 0 |" in md and "| 2400 | 0 |" in md, md


def test_convert_keeps_two_messages_of_one_role_as_the_replay_has_them(cli, tmp_path):
    """convert merged two messages of one role in a row into one: two replies so merged were one call
    (a Gemini CLI recording replayed with 3 calls fewer once converted) and two prompts one message
    (its tokens a few fewer). Each is written as the replay has it; the API takes such turns as one."""
    from compactlab import load_policy, load_transcript, replay

    src = write_jsonl(tmp_path / "t.jsonl", [{"role": "user", "content": "first"},
                                             {"role": "user", "content": [{"type": "text", "text": "second"}]},
                                             {"role": "assistant", "content": "ok"},
                                             {"role": "assistant", "content": "and again"}])
    assert cli("convert", src, "-o", tmp_path / "out.jsonl", "-q").exit_code == 0
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert lines == [{"role": "user", "content": "first"},
                     {"role": "user", "content": [{"type": "text", "text": "second"}]},
                     {"role": "assistant", "content": "ok"}, {"role": "assistant", "content": "and again"}]
    runs = [replay(load_transcript(str(p)), load_policy("none")).summary for p in (src, tmp_path / "out.jsonl")]
    assert [(s.calls, s.raw_tokens_total) for s in runs] == [(2, runs[0].raw_tokens_total)] * 2


def test_convert_says_the_format_of_a_recording_with_no_usage_nor_model(cli, tmp_path):
    """The format a file was recorded in rode on its first reply's usage or model: a recording with
    neither (an OpenAI-style chat document) lost it, and with it its prior and its harness."""
    from compactlab import load_transcript

    src = tmp_path / "chat.json"
    src.write_text(json.dumps([{"role": "user", "content": "go"}, {"role": "assistant", "content": "ok"}]))
    assert cli("convert", src, "-o", tmp_path / "out.jsonl", "-q").exit_code == 0
    assert load_transcript(str(src)).format == "openai"
    assert load_transcript(str(tmp_path / "out.jsonl")).metadata["recorded_format"] == "openai"


def test_convert_keeps_a_recorded_compaction_so_the_answer_survives(cli, tmp_path):
    """(#27 §8) The usage recorded after a compaction measured the compacted context: convert keeps
    the compaction (its documented form), so a calibrated replay of the file is the source's; with
    --drop-recorded-compactions that usage goes with it, never left beside the full history."""
    from compactlab import load_transcript
    from helpers import write_jsonl

    lines, chars = [{"role": "user", "content": "start"}], 0
    for i in range(12):
        if i == 6:
            lines.append({"role": "user", "content": "[summary of the work so far]",
                          "recorded_compaction": {"trigger": "auto", "pre_tokens": 9000}})
            chars = 400  # what the recording then sent: the summary and what came after
        lines.append({"type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                      "content": [{"type": "tool_use", "id": f"t{i}", "name": "bash", "input": {"i": i}}],
                      "usage": {"input_tokens": 800 + chars // 3, "output_tokens": 5},
                      "timestamp": f"2026-01-01T10:{i:02d}:00Z"})
        lines.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "x" * 900}]})
        chars += 1000
    src = write_jsonl(tmp_path / "src.jsonl", lines)

    def figures(path):
        s = json.loads(cli("replay", path, "-p", "none", "--dry-run", "--format", "json", "-q").stdout)["runs"][0]
        return s["summary"]["tokens_total"], s["summary"]["cost_usd"], s["summary"]["calibration"]

    kept, dropped = tmp_path / "kept.jsonl", tmp_path / "dropped.jsonl"
    assert cli("convert", src, "-o", kept, "-q").exit_code == 0
    assert figures(kept) == figures(src) and figures(src)[2]["source"] == "recorded usage"
    r = cli("convert", src, "-o", dropped, "--drop-recorded-compactions")
    assert r.exit_code == 0 and "the usage of the 6 call(s) after the first" in r.stderr
    t = load_transcript(str(dropped))
    assert not t.compactions and len(t.usage) == 6 and max(t.usage) < t.call_positions[6]


def test_a_narrower_terminal_loses_as_few_columns_as_it_takes_the_rightmost_first(monkeypatch):
    """(#31 §6) Between every column and the essential ones only, a terminal gets the widest
    table that fits: the other columns are left out from the right, one at a time."""
    import re

    from compactlab.reports.terminal import Printer, Table

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    t = Table()
    t.add_column("policy", min_width=25)
    for col in ("saving", "median (25-75%)", "recall", "summaries", "costs more on"):
        t.add_column(col, essential=col in ("saving", "recall"), justify="right", no_wrap=True)
    t.add_row("anthropic-clear-tool-uses", "+81.4%", "+0.0% (+0.0% to +24.6%)", "98.5%", "0", "0 of 7")
    widths = [t.narrowest_boxed()] + [n.narrowest_boxed() for n in t.narrowed()]
    assert widths == sorted(widths, reverse=True) and len(widths) == 4
    for width, missing in ((widths[0], []), (widths[1], ["costs more on"]), (widths[1] - 1, ["costs more on", "summaries"]),
                           (widths[3], ["costs more on", "summaries", "median"])):
        monkeypatch.setenv("COLUMNS", str(width))
        out = Terminal()
        Printer(out).table(t)
        text = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())
        assert "anthropic-clear-tool-uses" in text and "recall" in text  # the name whole, the essentials kept
        assert all(col not in text for col in missing), (width, text)
        assert max(len(line) for line in text.splitlines()) <= width


def test_a_long_setting_name_in_a_header_is_whole_where_it_fits_else_broken_after_a_separator(monkeypatch):
    """tune's table of Claude Code's settings at 80 columns folded its header mid-word
    ("CLAUDE_AUTOCOMPACT_PCT_O" / "VERRIDE"). A long name is now whole where the terminal has room,
    else broken after an underscore or a dot, and narrower still the column takes its short
    header; no header is ever broken inside a word."""
    import re

    from compactlab.reports.terminal import Printer, Table

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    t = Table(title="Pareto front of claude-code")
    t.add_column("point", justify="right")
    t.add_column("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE", justify="right", overflow="fold", short="pct")
    for col, short in (("cost saving", "saving"), ("recall", None), ("retention", "retain")):
        t.add_column(col, justify="right", no_wrap=True, short=short)
    t.add_column("cost", justify="right", no_wrap=True)
    t.add_row("base", "83", "64.2%", "98.9%", "90.2%", "$8.77")

    def shown(columns: int) -> list[str]:
        monkeypatch.setenv("COLUMNS", str(columns))
        out = Terminal()
        Printer(out).table(t)
        lines = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue()).splitlines()
        assert max(map(len, lines)) <= columns, (columns, lines)
        return lines

    assert any("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE" in line for line in shown(100))
    at_80 = "\n".join(shown(80))
    assert "CLAUDE_AUTOCOMPACT_ " in at_80 and "PCT_OVERRIDE " in at_80 and "AUTOCOMPACT_PCT" not in at_80
    at_60 = "\n".join(shown(60))
    assert "pct" in at_60 and "CLAUDE" not in at_60 and "83" in at_60


def test_an_indented_line_wraps_under_its_own_indentation_on_a_terminal(monkeypatch):
    """inspect --compactions prints a compaction as one long indented line: on a terminal its
    continuation lines were flush left, so the list read as one paragraph. Now they keep the
    line's indentation and ``indent`` more; a pipe still gets the line whole."""
    import re

    from compactlab.reports.terminal import Printer

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    line = "  #1 call 71: auto at 167,731 (83.9% of 200,000) -> 42,603; implied 167,000 " + "word " * 30
    monkeypatch.setenv("COLUMNS", "60")
    out = Terminal()
    Printer(out).text(line, indent="  ")
    lines = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue()).splitlines()
    assert len(lines) > 2 and lines[0].startswith("  #1 call 71") and max(map(len, lines)) <= 60
    assert all(x.startswith("    ") and not x.startswith("     ") for x in lines[1:]), lines
    assert " ".join(x.strip() for x in lines) == line.strip()
    piped = io.StringIO()
    Printer(piped).text(line, indent="  ")
    assert piped.getvalue() == line + "\n"


def test_a_sentence_in_a_right_justified_last_column_starts_at_the_column_on_a_terminal(monkeypatch):
    """A replay's summary at 80 columns wrapped its sentences ("the fit to recorded usage: …")
    into ragged lines flush right. As in plain text, a cell longer than a figure now starts at the
    column's start; the figures stay right-justified."""
    import re

    from compactlab.reports.terminal import PLAIN_FIGURE, Printer, Table

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    sentence = "the fit to recorded usage: 13,259 + chars / 3.5833 (mape 0.009 over 6 calls)"
    assert len(sentence) > PLAIN_FIGURE
    t = Table()
    t.add_column("key")
    t.add_column("value", justify="right")
    t.add_row("calls", "6")
    t.add_row("tokens estimated by", sentence)
    monkeypatch.setenv("COLUMNS", "60")
    out = Terminal()
    Printer(out).table(t)
    rows = [line.split("│")[1:3] for line in re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue()).splitlines()
            if line.startswith("│")]
    assert rows[0][0].strip() == "calls" and rows[0][1].endswith(" 6 ") and rows[0][1].startswith("  ")
    held = rows[1:]
    assert len(held) > 1 and all(value.startswith(" ") and not value.startswith("  ") for _, value in held), held
    assert " ".join(value.strip() for _, value in held) == sentence


def test_a_name_cut_to_fit_stays_apart_from_the_others():
    """compare's verdict at 80 columns cut a sweep's three labels evenly, and all three read
    "s08 summ…000 chars". A cut now keeps whole what the names do not share (after a common
    start, before a common end), else the most even cut that keeps them apart; a layout no cut
    keeps apart is not used."""
    from compactlab.reports.terminal import Table, cut_apart

    sweep = [f"s08 summary.trigger={v} chars" for v in (30000, 60000, 120000)] + ["none"]
    assert cut_apart(sweep, 18) == ["s08 s…=30000 chars", "s08 s…=60000 chars", "s08 s…120000 chars", "none"]
    ends = ["alpha-session-one.jsonl", "beta-session-one.jsonl", "gamma-session-one.jsonl"]
    assert [c[:5] for c in cut_apart(ends, 12)] == ["alph…", "beta…", "gamm…"]  # (all before the shared end)
    plain = ["abcdefghijklmnopqrstuvwxyz", "zyxwvutsrqponmlkjihgfedcba"]
    assert cut_apart(plain, 11) == ["abcde…vwxyz", "zyxwv…edcba"]  # (nothing shared: even, as before)
    assert cut_apart(["a" * 30 + "1" + "b" * 30, "a" * 30 + "2" + "b" * 30], 20) is None
    t = Table()
    t.add_column("policy", cut="middle")
    t.add_column("saving", justify="right", no_wrap=True)
    for label in sweep:
        t.add_row(label, "+90.0%")
    cut = t.cut_to(30)
    assert cut is not None and len({cells[0] for cells, _ in cut.rows}) == len(sweep)


def test_a_shorten_column_is_cut_to_the_room_the_others_leave_it_and_only_then():
    """next-action's dry run folded a recorded action over two or three lines at 80 columns. A
    column given ``shorten`` has each cell longer than the room the other columns leave it made
    by that function at that width (a row a line); a cell that fits, a table that fits, a room
    under the column's least width, and a second column rich could narrow leave it as it was."""
    from compactlab.reports.terminal import Table

    asked: list[tuple[int, int]] = []

    def shorten(k: int, width: int) -> str:
        asked.append((k, width))
        return f"row {k} in {width}"[:width]

    def table(second_wraps: bool = False) -> Table:
        t = Table()
        t.add_column("name", no_wrap=True)
        t.add_column("action", overflow="fold", min_width=12, shorten=shorten)
        t.add_column("figure", justify="right", no_wrap=not second_wraps)
        t.add_row("a", "x" * 40, "1")
        t.add_row("b", "short", "22")
        return t

    t = table()
    whole = t.narrowest_boxed() + 40 - 12  # (the action at its natural width of 40)
    assert t.fitted(whole) is t and not asked  # (it fits: nothing called)
    fitted = t.fitted(whole - 10)  # (10 narrower: the action's room 30)
    assert [cells[1] for cells, _ in fitted.rows] == ["row 0 in 30", "short"] and asked == [(0, 30)]
    assert fitted.columns[1][1]["no_wrap"] and fitted.narrowest_boxed() <= whole - 10
    assert t.fitted(t.narrowest_boxed() - 1) is t  # (less room than its least width: rich folds, as before)
    assert table(second_wraps=True).fitted(whole - 10).rows == table(second_wraps=True).rows
    assert fitted.rich().columns[1].no_wrap  # (rich draws it, not handed the option: it refuses one it lacks)
    # (too narrow for any table, each row as lines: a long cell made to fit after its header, the others as they are)
    asked.clear()
    lines = [line for line, _ in t.stacked(24)]
    assert "  action: row 0 in 14" in lines and "  action: short" in lines and asked == [(0, 14)], lines
    assert "  action: " + "x" * 40 in [line for line, _ in t.stacked()]  # (no width: whole, as before)


def test_compare_explains_its_red_rows_and_keeps_what_the_verdict_cites_at_100_columns(monkeypatch):
    """(#31 §6) At 100 columns the verdict keeps retention and recall (its sentence cites them) and
    the policy names whole; the red rows are explained under the runs."""
    import re

    from compactlab.jobs.base import Settings
    from compactlab.jobs.compare import Grid, compare_files
    from compactlab.reports.compare_report import write_table

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    done = compare_files([str(SAMPLES / "synth-medium.jsonl"), str(SAMPLES / "synth-small.jsonl")],
                         Grid(policies=["anthropic-clear-tool-uses", "s08", "observation-masking"]),
                         Settings(dry_run=True, jobs=1))
    monkeypatch.setenv("COLUMNS", "100")
    out = Terminal()
    write_table(done.comparison, out)
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())
    verdict = text.split("No policy")[0] if "No policy" in text else text.split("runs")[0]
    # (retention under its short head where the full heads do not fit; the names whole)
    assert "retained" in verdict and "recall" in verdict and "anthropic-clear-tool-uses" in verdict
    assert "Rows in red:" in text and "introduce tool-pairing violations" in text and "cost more than no compaction" in text
    assert max(len(line) for line in text.splitlines()) <= 100
    # (a dry run wrote no report: the file that says how much is one a compare without it writes)
    assert "report.md of a compare without --dry-run says how much" in " ".join(text.split())


def test_a_dry_run_names_no_file_as_written(cli, monkeypatch):
    """What the terminal says is in a file (each compaction, each run) says, in a dry run, that a
    run without --dry-run writes it: a dry run writes nothing."""
    from compactlab.reports import compare_report

    dry = cli("replay", SAMPLES / "synth-medium.jsonl", "--dry-run")
    assert "(each in compactions.csv, without --dry-run)" in dry.stdout and "compactions.csv has each" not in dry.stdout
    monkeypatch.setattr(compare_report, "MAX_TERMINAL_RUNS", 1)
    many = cli("compare", SAMPLES / "synth-small.jsonl", "-p", "s08", "--dry-run", "--jobs", "1")
    assert many.exit_code == 0, many.stderr
    assert "runs: each is in results.csv, results.json and report.html of a compare without --dry-run." in many.stdout


def test_policies_list_at_60_columns_shows_names_and_what_they_do(monkeypatch):
    """(#31 §6) The fingerprint gives way first; the default preset says what it does, not its seed."""
    import re

    from compactlab.engine.policy import load_policy, preset_names
    from compactlab.reports.policy_report import write_list_table

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setenv("COLUMNS", "60")
    out = Terminal()
    write_list_table([load_policy(name) for name in preset_names()], out)
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())
    assert "fingerprint" not in text and "anthropic-clear-tool-uses" in text and "│" in text
    assert max(len(line) for line in text.splitlines()) <= 60
    assert load_policy("s08").brief.startswith("The default: persists big outputs")


def test_every_command_that_reads_folders_takes_the_verbose_its_notes_name():
    """A command that reads a folder's sessions says what it skipped, or their calibrations, in one
    line "(each with -v)": each such command takes -v (inspect did not)."""
    import importlib

    from compactlab.cli import COMMANDS

    readers = [name for name, (module, _) in COMMANDS.items()
               if "inputs_of(" in (ROOT / "compactlab" / "cli" / f"{module}.py").read_text()]
    assert {"replay", "compare", "check", "tune", "next-action", "inspect"} <= set(readers)
    for name in readers:
        module = COMMANDS[name][0]
        command = getattr(importlib.import_module(f"compactlab.cli.{module}"), module)
        assert "-v" in {o for p in command.params for o in p.opts}, name


def test_policies_show_writes_a_long_description_as_lines_of_words_that_read_back_the_same(tmp_path):
    """`policies show codex` wrote each preset's description on one TOML line of 1,500 characters,
    which a terminal folded mid-word ("ModelI" / "nfo::"). A long string is now a multi-line TOML
    string broken between words, each line ending in a backslash: tomllib reads back every
    preset's values exactly, the fingerprint is the same, and no line is longer than a word needs."""
    import tomllib

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from compactlab.engine.policy import load_policy, preset_names
    from compactlab.reports.policy_report import TOML_WIDTH, _long_string, to_toml

    for name in preset_names():
        policy = load_policy(name)
        text = to_toml(policy)
        assert tomllib.loads(text) == policy.resolved(), name
        for line in text.splitlines():
            assert len(line) <= TOML_WIDTH or " " not in line.strip(" \\"), (name, line)
        path = tmp_path / f"{name}.toml"
        path.write_text(text)
        assert load_policy(str(path)).fingerprint == policy.fingerprint, name
    assert '"""' in to_toml(load_policy("codex"))  # (its description is long: it was broken)

    @settings(max_examples=300, deadline=None)
    @given(st.text(st.sampled_from(list("ab \t\\\"\n\u00a0\u2028\x7f\x1b")) | st.characters(blacklist_categories=("Cs",)), max_size=400))
    def reads_back(value: str) -> None:
        assert tomllib.loads(_long_string("k", value))["k"] == value

    reads_back()


@pytest.mark.parametrize("args, error, hint", [
    (["compare", "--harness", "claude"], "error: Invalid value for '--harness': 'claude' is not one of 'claude-code',",
     "hint: did you mean claude-code? main compare --help lists what it takes"),
    (["replay", SMALL, "--input-format", "anthropc"], "error: Invalid value for '--input-format': 'anthropc'",
     "hint: did you mean anthropic? main replay --help lists what it takes"),
    (["compare", SMALL, "--charts", "nne"], "error: Invalid value for '--charts': 'nne' is not one of",
     "hint: did you mean none? main compare --help lists what it takes"),
    (["check", SMALL], "error: Missing option '--baseline'.", "hint: main check --help lists what it takes"),
    (["replay", SMALL, "--sort", "x"], "error: No such option '--sort'.", "hint: main replay --help lists what it takes"),
    (["--bad"], "error: No such option '--bad'.", "hint: main --help lists what it takes"),
    (["--versio"], "error: No such option '--versio'.", "hint: main --help lists what it takes"),
    (["replayy", SMALL], "error: No such command 'replayy'.", "hint: did you mean replay? main --help lists what it takes"),
    (["comapre"], "error: No such command 'comapre'.", "hint: did you mean compare? main --help lists what it takes"),
])
def test_a_commands_usage_error_is_one_line_and_a_hint_with_the_names_spelt_like_it(cli, args, error, hint):
    """click printed a command's usage errors as three paragraphs ("Usage: …", "Try …", "Error:
    Invalid value for '--harness': 'claude' is not one of …") and suggested no name. They are now
    said as every error is: one line, then a hint, with the names spelt most like a mistyped one."""
    r = cli(*args)
    assert r.exit_code == 2
    lines = r.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith(error) and lines[1] == hint, r.stderr


def test_no_command_at_all_still_shows_the_help(cli):
    """An error before a command is chosen is one line too (above); no arguments at all is not an
    error of that kind: the help, with the commands."""
    r = cli()
    assert r.exit_code in (0, 2) and "Commands:" in r.output and "error:" not in r.output


def test_a_usage_error_shows_a_mistyped_values_control_characters_never_obeys_them(cli):
    """A command's usage error, now said by compactlab in one line, still shows a refused value's
    control characters as escapes (click quotes the value; compactlab's line shows what is left)."""
    r = cli("replay", SMALL, "--format", "json\x1b[2J\x07")
    assert r.exit_code == 2 and "\x1b" not in r.stderr and "\x07" not in r.stderr
    assert "json\\x1b[2J\\x07" in r.stderr.splitlines()[0] and r.stderr.splitlines()[1].startswith("hint: ")

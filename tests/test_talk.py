"""Levels of talk (#31 §1): by default one line for the per-file notes and a warning per file only
where something is wrong; -v each file's note; -q no notes or warnings, but a progress bar on a
terminal; paths shown relative to the current folder."""

from __future__ import annotations

import os
import sys

from corpus.test_calibration_default import with_usage
from helpers import SAMPLES, write_jsonl


def corpus(tmp_path, n=3):
    folder = tmp_path / "sessions"
    folder.mkdir()
    for i in range(n):
        write_jsonl(folder / f"s{i}.jsonl", with_usage(8 + i))
    return folder


def test_compare_says_one_line_for_the_calibrations_and_each_with_verbose(cli, tmp_path, monkeypatch):
    folder = corpus(tmp_path)
    monkeypatch.chdir(tmp_path)
    r = cli("compare", "sessions", "-p", "s08", "--dry-run", "--format", "csv")
    assert r.exit_code == 0, r.output
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert lines == [next(x for x in lines if x.startswith("calibrated 3 transcript(s): "))], lines
    assert "chars/token, mape ≤ " in lines[0] and "(each with -v)" in lines[0]
    r = cli("compare", "sessions", "-p", "s08", "--dry-run", "--format", "csv", "-v")
    per_file = [x for x in r.stderr.splitlines() if ": calibrated: " in x]
    assert len(per_file) == 3 and all(x.startswith(os.path.join("sessions", "s")) for x in per_file)  # relative
    r = cli("compare", str(folder), "-p", "s08", "--dry-run", "--format", "csv", "-q")
    assert r.exit_code == 0 and r.stderr == ""


def test_replay_of_a_folder_says_one_line_too(cli, tmp_path, monkeypatch):
    corpus(tmp_path)
    monkeypatch.chdir(tmp_path)
    r = cli("replay", "sessions", "--dry-run", "--format", "json")
    calibrated = [x for x in r.stderr.splitlines() if "calibrated" in x]
    assert r.exit_code == 0 and calibrated == [calibrated[0]] and calibrated[0].startswith("calibrated 3 ")
    one = cli("replay", os.path.join("sessions", "s0.jsonl"), "--dry-run", "--format", "json")
    assert one.stderr.startswith(os.path.join("sessions", "s0.jsonl") + ": calibrated: ")  # one file: its line


def test_quiet_keeps_the_progress_bar_on_a_terminal(monkeypatch):
    from compactlab.cli.common import progress_bar

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert progress_bar(True)("runs", 3).enabled and not progress_bar(True)("runs", 1).enabled
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    assert not progress_bar(False)("runs", 3).enabled  # not a terminal: no bar


def test_report_files_are_a_status_line_on_stderr_and_out_has_a_short_form(cli, tmp_path):
    from helpers import SAMPLES

    r = cli("replay", SAMPLES / "synth-small.jsonl", "-o", tmp_path / "r")
    assert r.exit_code == 0 and (tmp_path / "r" / "summary.json").is_file()
    assert "report files" not in r.stdout and f"wrote {tmp_path / 'r'}/summary.json" in r.stderr
    r = cli("replay", SAMPLES / "synth-small.jsonl", "-o", tmp_path / "q", "-q")
    assert r.exit_code == 0 and r.stderr == "" and "wrote" not in r.stdout


def test_a_terminal_that_cannot_show_a_character_gets_an_escape_not_an_error(tmp_path):
    import subprocess

    from helpers import SAMPLES

    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    r = subprocess.run([sys.executable, "-m", "compactlab", "replay", str(SAMPLES / "synth-small.jsonl"), "--dry-run"],
                       capture_output=True, env=env, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    assert b"\\xd7 s08" in r.stdout  # the title's ×, escaped


def test_standard_input_is_titled_so_and_a_chart_draws_what_happened(cli, tmp_path, monkeypatch):
    from compactlab.reports import charts
    from helpers import SAMPLES

    r = cli("replay", "-", "--dry-run", input=(SAMPLES / "synth-small.jsonl").read_bytes())
    assert r.exit_code == 0 and r.stdout.startswith("- (standard input) × s08")
    drawn = {}
    real = charts.tokens_chart

    def spy(title, raw, series, palette=None):
        drawn.update(title=title, series=series)
        return real(title, raw, series, palette)

    monkeypatch.setattr(charts, "tokens_chart", spy)
    path = tmp_path / "sub" / "t.jsonl"
    path.parent.mkdir()
    path.write_bytes((SAMPLES / "synth-medium.jsonl").read_bytes())
    assert cli("replay", path, "--chart", "-o", tmp_path / "c", "-q").exit_code == 0
    [s] = drawn["series"]
    assert drawn["title"] == "t.jsonl × s08"  # the file's name, not its path
    assert s["levels"]["summary trigger"] == 50_000 / 4  # s08's chars trigger in tokens (no overhead here)
    assert set(s["events"]) == {"summary", "manual"}  # no reactive compaction happened: none listed


def test_replay_of_several_files_ends_with_their_totals(cli, tmp_path):
    """(#31 §6) A totals line after the runs of a folder: the corpus's ratios of sums."""
    from compactlab.metrics import totals
    from helpers import SAMPLES

    files = [SAMPLES / "synth-small.jsonl", SAMPLES / "synth-medium.jsonl"]
    r = cli("replay", *files, "--dry-run")
    j = cli("replay", *files, "--dry-run", "--format", "json")
    import json

    summaries = [run["summary"] for run in json.loads(j.stdout)["runs"]]
    t = totals(summaries)
    last = r.stdout.strip().splitlines()[-1]
    assert last.startswith("2 transcripts × s08: 150 calls;")
    assert f"(saves {t['cost_saving'] * 100:.1f}%)" in last and f"recall {t['recall'] * 100:.1f}%" in last
    one = cli("replay", files[0], "--dry-run")
    assert "transcripts × s08" not in one.stdout


def test_a_key_whose_layer_never_acts_is_named(cli, tmp_path):
    """(#31 §5) A --set, --sweep or --space key whose layer is on but never acts on these
    transcripts (its trigger is reached at no value given) is said, in compare, replay and tune;
    a key whose layer acts is not."""
    import json

    from helpers import SAMPLES

    small = SAMPLES / "synth-small.jsonl"
    never = "no transcript reaches its trigger at any value given"
    r = cli("compare", small, "-p", "s08", "--sweep", "summary.trigger=5000000,9000000", "--dry-run",
            "--format", "csv", "--set", "micro.keep_recent=2")
    assert r.exit_code == 0, r.stderr
    assert f"summary.trigger: s08's summary layer never acted in its 2 run(s) ({never})" in r.stderr
    assert "micro.keep_recent" not in r.stderr  # micro clears results on this session
    r = cli("replay", small, "--set", "summary.trigger=9000000", "--dry-run", "--format", "csv")
    assert r.exit_code == 0 and "summary.trigger: s08's summary layer never acted" in r.stderr
    r = cli("replay", small, "--set", "micro.keep_recent=2", "--dry-run", "--format", "csv")
    assert r.exit_code == 0 and "never acted" not in r.stderr
    r = cli("tune", small, "-p", "s08", "--space", "summary.trigger=5000000:9000000", "--trials", "3",
            "--out", tmp_path / "tune", "--no-chart", "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert "summary.trigger: s08's summary layer never acted" in r.stderr
    assert json.loads((tmp_path / "tune" / "front.json").read_text())["notes"][0].startswith("summary.trigger:")
    r = cli("tune", small, "-p", "s08", "--space", "summary.trigger=5000000:9000000", "--trials", "3",
            "--out", tmp_path / "tune-table", "--no-chart")
    assert r.exit_code == 0, r.stderr
    assert (r.stdout + r.stderr).count("never acted") == 1  # (said once: not again under the table)


def test_a_line_said_while_a_progress_bar_shows_goes_above_it(monkeypatch, capsys):
    """(#31 §1) A warning during a corpus job's bar is printed by the bar's console (above it),
    never into the bar's own line."""
    from compactlab.reports import terminal

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert terminal.say("before") is False  # no bar: the caller prints
    with terminal.Progress("reading", 3) as advance:
        assert terminal.say("warning: \x1b[31mred\x1b[0m") is True
        advance(None)
    assert terminal.say("after") is False
    assert "\\x1b[31mred" in capsys.readouterr().err  # (shown, not obeyed)


def test_redacted_texts_are_a_note_not_a_warning(cli, tmp_path):
    from helpers import write_jsonl

    def line(i, payload):
        return {"timestamp": f"2026-01-01T00:00:{i:02d}Z", "type": "response_item", "payload": payload}

    rollout = write_jsonl(tmp_path / "rollout.jsonl", [
        line(0, {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "[REDACTED_TEXT len=9 sha=ab]"}]}),
        line(1, {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]})])
    quiet = cli("compare", rollout, rollout, "-p", "s08", "--dry-run", "--format", "csv")
    assert quiet.exit_code == 0 and "redacted text" not in quiet.stderr
    said = cli("compare", rollout, rollout, "-p", "s08", "--dry-run", "--format", "csv", "-v")
    assert "1 redacted text(s)" in said.stderr and "warning" not in said.stderr.split("redacted")[0].splitlines()[-1]


def test_a_folder_file_that_is_no_transcript_is_skipped_and_said(cli, tmp_path):
    """(#33) A folder stands for its session files; one that fits no format (a task folder's
    ui_messages.json, a fixture's truth file) is skipped with one line, not the end of the command;
    named on the command line it is still an error."""
    import shutil

    from helpers import SAMPLES

    folder = tmp_path / "sessions"
    folder.mkdir()
    shutil.copy(SAMPLES / "synth-small.jsonl", folder / "a.jsonl")
    (folder / "notes.json").write_text('{"what": "not a transcript"}')
    for args in (("replay", folder, "--dry-run", "--format", "csv"), ("compare", folder, "-p", "s08", "--dry-run",
                                                                      "--format", "csv")):
        r = cli(*args)
        assert r.exit_code == 0, r.stderr
        assert "skipped 1 file(s) that are not transcripts in a known format" in r.stderr
        assert "notes.json" not in r.stderr  # (with -v)
    assert "skipped " in cli("replay", folder, "--dry-run", "--format", "csv", "-v").stderr
    named = cli("replay", folder / "notes.json", "--dry-run")
    assert named.exit_code == 2 and "not a transcript in any known format" in named.stderr
    only = tmp_path / "nothing"
    only.mkdir()
    (only / "notes.json").write_text("{}")
    r = cli("compare", only, "-p", "s08", "--dry-run")
    assert r.exit_code == 2 and "no file of the folder(s) is a transcript in a known format" in r.stderr


def test_the_first_screen_says_what_the_policy_is_and_leaves_out_what_is_zero(cli):
    """(#47 §5) A preset is named with what it does; 'saved transcripts 1 (0 written)' is not shown."""
    r = cli("replay", SAMPLES / "manual-compact.jsonl", "--dry-run")
    assert r.exit_code == 0, r.stderr
    first = r.stdout.splitlines()[0]
    assert "× s08 (The default: persists big outputs" in first and "fingerprint" in first
    assert "saved transcripts" not in r.stdout


def test_an_implausible_calibration_is_a_warning_with_its_cause():
    from compactlab.corpus.calibration import Calibration, implausible

    low = Calibration(100, 0.64, 0.05, 13, "recorded usage")
    assert "0.64 characters a token, outside 2–6" in implausible(low) and "left out" in implausible(low)
    assert implausible(Calibration(100, 7.5, 0.05, 13, "recorded usage")).startswith("the fit")
    assert implausible(Calibration(100, 3.2, 0.05, 13, "recorded usage")) is None
    assert implausible(Calibration(100, 0.5, None, 0, "policy")) is None  # (not a fit: nothing to doubt)

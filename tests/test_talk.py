"""Levels of talk (#31 §1): by default one line for the per-file notes and a warning per file only
where something is wrong; -v each file's note; -q no notes or warnings, but a progress bar on a
terminal; paths shown relative to the current folder."""

from __future__ import annotations

import os
import sys

from corpus.test_calibration_default import with_usage
from helpers import write_jsonl


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
    from compactlab import cli

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert cli._progress(True)("runs", 3).enabled and not cli._progress(True)("runs", 1).enabled
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    assert not cli._progress(False)("runs", 3).enabled  # not a terminal: no bar

"""What a terminal shows (#47 §3), on a real pseudo-terminal at 60, 80, 100 and 160 columns: compare's
verdict for six presets and inspect of many sessions, compared with committed captures
(``tests/reports/screens/``; ``UPDATE_SCREENS=1`` rewrites them after an intended change)."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios

import pytest

from helpers import ROOT, SAMPLES

SCREENS = ROOT / "tests" / "reports" / "screens"
PRESETS = ["s08", "claude-code", "codex", "observation-masking", "opencode", "gemini-cli"]
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def on_terminal(args: list[str], columns: int, stream: str = "stdout", status: int = 0) -> str:
    """What ``compactlab ARGS`` writes to a terminal ``columns`` wide: its standard output (the
    status lines of standard error are not part of the screen compared), or its standard error
    (``stream``), the other going nowhere; it must end with ``status``. The tests' steps
    (``custom_steps``) are importable."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {**os.environ, "COLUMNS": str(columns), "LINES": "50", "TERM": "xterm-256color", "NO_COLOR": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    out, err = (slave, subprocess.DEVNULL) if stream == "stdout" else (subprocess.DEVNULL, slave)
    proc = subprocess.Popen([sys.executable, "-m", "compactlab", *args], stdout=out, stderr=err,
                            stdin=subprocess.DEVNULL, env=env, cwd=ROOT)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # (the other end closed: Linux says EIO)
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=120) == status
    text = _ANSI.sub("", b"".join(chunks).decode("utf-8")).replace("\r\n", "\n")
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


def matches(name: str, text: str) -> None:
    path = SCREENS / name
    if os.environ.get("UPDATE_SCREENS") == "1" and not os.environ.get("CI"):
        SCREENS.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"no capture {path.name}: run with UPDATE_SCREENS=1"
    assert text == path.read_text(), f"{name} differs from its capture"


@pytest.mark.parametrize("columns", [60, 80, 100, 160])
def test_compare_of_six_presets(columns):
    args = ["compare", str(SAMPLES / "synth-small.jsonl"), str(SAMPLES / "manual-compact.jsonl"),
            *[a for p in PRESETS for a in ("-p", p)], "--dry-run", "-q", "--charts", "none"]
    text = on_terminal(args, columns)
    matches(f"compare-{columns}.txt", text)
    assert max(len(line) for line in text.splitlines()) <= columns
    if columns >= 80:  # the verdict, one row a policy, and its sentence: one screen
        verdict = text.split("\nOverflows judged")[0].split("\n2 transcript")[0]
        assert len(verdict.splitlines()) <= 24, verdict
        assert all(any(p[:8] in line for line in verdict.splitlines()) for p in PRESETS)
    else:  # (too narrow for the verdict's table: each policy's figures run together, three lines at most)
        rows = text.split("\nUse ")[0].splitlines()[2:]
        assert len(rows) <= 3 * (len(PRESETS) + 1) and sum(line.count("·") for line in rows) >= 4 * len(PRESETS), rows
        assert not any(line.endswith("·") for line in rows), rows  # (broken between two figures, not after a "·")


@pytest.mark.parametrize("columns", [60, 80, 100, 160])
def test_inspect_of_many_sessions_is_a_line_each(columns):
    text = on_terminal(["inspect", "sample_transcripts"], columns)  # (relative: the capture holds no machine's path)
    matches(f"inspect-{columns}.txt", text)
    rows = [line for line in text.splitlines() if ".jsonl" in line or "…" in line]
    assert len(rows) == len(list(SAMPLES.glob("*.jsonl")))
    assert max(len(line) for line in text.splitlines()) <= columns


@pytest.mark.parametrize("columns", [60, 80])
def test_version_on_a_terminal_is_broken_between_words_at_its_width(columns):
    """The core's line fits the terminal, broken between words where it is longer (at 60 columns);
    a pipe gets it on one line, the same words."""
    text = on_terminal(["--version"], columns)
    lines = text.splitlines()
    piped = subprocess.run([sys.executable, "-m", "compactlab", "--version"], capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, check=True).stdout.splitlines()
    assert len(piped) == 2 and lines[0] == piped[0] and lines[1].startswith("core: ")
    assert max(len(line) for line in lines) <= columns
    assert " ".join(line.strip() for line in lines[1:]) == piped[1]


def test_a_replay_through_a_step_of_your_own_shows_its_calls_on_a_terminal(tmp_path):
    """A step of your own (or a framework's code) runs at every call, at a cost compactlab does not
    know: on a terminal, the replay shows a bar of its calls (on standard error, gone at the end);
    a built-in policy's replay, which takes a fraction of a second, shows none."""
    def stderr_on_terminal(policy: str) -> str:
        return on_terminal(["replay", str(SAMPLES / "synth-medium.jsonl"), "-p", policy,
                            "--out", str(tmp_path / policy.replace(":", "-")), "-q"], 100, stream="stderr")

    shown = stderr_on_terminal("py:custom_steps:same")
    assert "replaying synth-medium.jsonl" in shown and "120/" in shown, shown  # (its 120 calls, streamed: no end known)
    assert "replaying" not in stderr_on_terminal("s08")


@pytest.mark.parametrize("columns", [60, 80])
def test_what_is_said_on_standard_error_is_broken_between_words_at_the_terminals_width(columns):
    """An error, its hint and the notes of a run, on a terminal: lines no wider than it, broken
    between words (the terminal would cut a word in two); into a pipe, each a line whole."""
    args = ["replay", str(SAMPLES / "synth-small.jsonl"), "--set", "summary.trigerr=4"]
    shown = on_terminal(args, columns, stream="stderr", status=2).splitlines()
    words = "error: s08 with --set: summary.trigerr: unknown key hint: did you mean summary.trigger or " \
            "summary.trigger_rule or summary.trigger_share? (compactlab policies show s08 lists every key)"
    assert len(shown) >= 3 and all(len(line) <= columns for line in shown), shown
    assert " ".join(shown).split() == words.split()  # (every word whole, in order)
    piped = subprocess.run([sys.executable, "-m", "compactlab", *args], capture_output=True, text=True, cwd=ROOT,
                           env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": str(columns)})
    assert piped.stderr.splitlines() == ["error: s08 with --set: summary.trigerr: unknown key",
                                         "hint: " + words.split("hint: ", 1)[1]]


@pytest.mark.parametrize("command", ["replay", "inspect"])
def test_the_figures_of_a_replay_or_an_inspect_stay_near_their_names_on_a_wide_terminal(command, tmp_path):
    """At 160 columns the value column of a replay's summary (and of inspect's facts) took the
    width of its longest sentence or path, so every figure stood right-aligned a hundred columns
    from its name. The column is now at most ``VALUE_WIDEST`` wide: a sentence wraps there, and
    each figure ends where the others do."""
    from compactlab.reports.terminal import VALUE_WIDEST

    extra = ["-p", "s08", "--dry-run"] if command == "replay" else []
    path = SAMPLES / "manual-compact.jsonl"
    if command == "inspect":  # (a long value in its facts: a model's name of 100 characters)
        import orjson

        lines = [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
        path = tmp_path / "long-model.jsonl"
        path.write_bytes(b"".join(orjson.dumps({**m, "model": "m" * 100} if m.get("role") == "assistant" else m) + b"\n"
                                  for m in lines))
    text = on_terminal([command, str(path), *extra], 160)
    rows = [line for line in text.splitlines() if line.startswith("│")]
    rows = rows[:next((k for k, line in enumerate(rows) if line.count("│") != 3), len(rows))]  # (the first table)
    assert rows and len({len(line) for line in rows}) == 1
    value = rows[0].split("│")[2]
    assert len(value) == VALUE_WIDEST + 2, rows[0]  # (its padding: a space each side)

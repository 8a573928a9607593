"""Fuzzed inputs (SPEC §2, §11): corrupted real and synthetic files never cause a traceback.

Every mutated file either replays (exit 0), or fails with a one-line error naming the file (and
the line, for a bad line) and exit 2; with --skip-bad-lines, a file that still holds a transcript
replays and reports how many lines it skipped. The run is bounded (a fixed number of inputs from
a fixed seed); the outcome counts are written to ``fuzz-outcomes.json`` in the test's folder.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from pathlib import Path

import pytest

from helpers import SAMPLES, SHARED

INPUTS = 150  # mutated files per run


def corpus() -> list[Path]:
    files = [SAMPLES / n for n in ("synth-small.jsonl", "parallel-batch.jsonl", "manual-compact.jsonl", "huge-batch.jsonl")]
    real = SHARED / "transcripts"
    if real.is_dir():  # real files when the shared folder is there; the synthetic ones always
        files += [real / "claude_code" / "spotter" / "tool_heavy.jsonl",
                  real / "claude_code" / "claude-code-viewer" / "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl",
                  *sorted((real / "openai").glob("*.traj*"))]
    return files


def mutate(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    lines = data.split(b"\n")
    i = rng.randrange(len(lines))
    kind = rng.choice(["truncate", "cut_line", "garbage", "invalid_utf8", "u2028", "deep", "wrong_type", "nan",
                       "non_object", "duplicate_keys", "nul_tail", "drop_line", "swap_lines"])
    line = lines[i]
    if kind == "truncate":
        return kind, data[: rng.randrange(1, max(2, len(data)))]
    if kind == "cut_line":
        lines[i] = line[: len(line) // 2]
    elif kind == "garbage":
        pos = rng.randrange(len(line) + 1)
        lines[i] = line[:pos] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 12))) + line[pos:]
    elif kind == "invalid_utf8":
        pos = rng.randrange(len(line) + 1)
        lines[i] = line[:pos] + b"\xff\xfe\xc3" + line[pos:]
    elif kind == "u2028":
        lines[i] = line.replace(b'"', '"\u2028'.encode(), 1) if b'"' in line else line
    elif kind == "deep":
        depth = rng.choice([150, 250, 2000])
        lines.insert(i, b'{"role": "user", "content": [' + b"[" * depth + b"]" * depth + b"]}")
    elif kind == "wrong_type":
        lines[i] = re.sub(rb'"content":\s*("|\[)', rb'"content": 42, "x": \1', line, count=1)
        lines[i] = lines[i].replace(b'"type":"tool_use"', b'"type":"tool_use","id":7', 1)
    elif kind == "nan":
        lines[i] = re.sub(rb":\s*(\d+)", b": NaN", line, count=1) if re.search(rb":\s*\d", line) else b'{"role": NaN}'
    elif kind == "non_object":
        lines[i] = rng.choice([b"[1, 2, 3]", b"42", b'"text"', b"null", b"true"])
    elif kind == "duplicate_keys":
        lines[i] = line.replace(b'{"role":', b'{"role": "assistant", "role":', 1)
    elif kind == "nul_tail":
        return kind, data + b"\x00" * rng.randint(1, 4096)
    elif kind == "drop_line":
        del lines[i]
    elif kind == "swap_lines" and len(lines) > 1:
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    return kind, b"\n".join(lines)


def test_fuzzed_inputs_never_cause_a_traceback(cli, tmp_path):
    rng = random.Random(20261126)
    files = corpus()
    outcomes: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    for n in range(INPUTS):
        source = files[n % len(files)]
        kind, data = mutate(source.read_bytes(), rng)
        kinds[kind] += 1
        path = tmp_path / f"fuzz-{n:03d}{''.join(source.suffixes)}"
        path.write_bytes(data)
        for skip in (False, True):
            args = ["replay", path, "--dry-run", "--format", "json", "-p", "s08"] + (["--skip-bad-lines"] if skip else [])
            r = cli(*args)
            assert r.exit_code in (0, 2), (kind, source.name, skip, r.exit_code, r.stderr[-500:])
            assert "Traceback" not in r.stderr + r.stdout
            if r.exit_code == 2:
                first = r.stderr.splitlines()[0]
                assert first.startswith(f"error: {path}"), first
                if not skip and re.match(rf"error: {re.escape(str(path))}:\d+: ", first):
                    outcomes["exit 2, file:line named"] += 1
                else:
                    # with --skip-bad-lines only whole-file problems remain
                    assert not skip or re.search(r"not a transcript|no messages|empty file|invalid JSON document|"
                                                 r"cannot read|message \d+:|not a (mini-swe-agent|SWE-agent)|"
                                                 r"not a list", first), first
                    outcomes[f"exit 2, whole file{' (skipping)' if skip else ''}"] += 1
            else:
                summary = json.loads(r.stdout)["runs"][0]["summary"]
                if skip and summary["skipped_lines"]:
                    assert f"skipped {summary['skipped_lines']} bad line" in r.stderr
                    outcomes["exit 0, bad lines skipped and counted"] += 1
                else:
                    outcomes[f"exit 0{' (skipping)' if skip else ''}"] += 1
    assert sum(outcomes.values()) == 2 * INPUTS
    assert outcomes["exit 2, file:line named"] > 0 and outcomes["exit 0, bad lines skipped and counted"] > 0
    (tmp_path / "fuzz-outcomes.json").write_text(json.dumps({"inputs": INPUTS, "mutations": kinds, "outcomes": outcomes}))
    print(json.dumps({"inputs": INPUTS, "mutations": kinds, "outcomes": outcomes}, indent=1))


@pytest.fixture
def huge_line(tmp_path):
    path = tmp_path / "one-line.jsonl"
    with open(path, "wb") as f:
        f.write(b'{"role": "user", "content": "')
        chunk = b"0123456789abcdef" * 65536  # 1 MiB
        for _ in range(200):
            f.write(chunk)
        f.write(b'"}\n{"role": "assistant", "content": "ok"}\n')
    return path


@pytest.mark.slow  # (a 200 MB line: CI runs it with pytest -m slow)
def test_a_single_200_mb_line(cli, huge_line):
    r = cli("replay", huge_line, "-p", "none", "--dry-run", "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["runs"][0]["summary"]["calls"] == 1
    with open(huge_line, "r+b") as f:  # the same line, cut short by a crash
        f.truncate(150 * 1024 * 1024)
    r = cli("replay", huge_line, "-p", "none", "--dry-run")
    assert r.exit_code == 2 and r.stderr.startswith(f"error: {huge_line}: not a transcript")
    assert "(line 1: invalid JSON" in r.stderr and len(r.stderr.splitlines()) == 1

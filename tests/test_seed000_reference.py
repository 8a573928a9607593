"""The engine's s08 agrees, call by call, with a literal implementation of seed 000."""

from __future__ import annotations

import pytest

from compactlab import load_policy, load_transcript, replay
from compactlab.synth import generate
from helpers import SAMPLES, write_jsonl
from reference_s08 import Seed000

FIELDS = ("messages", "chars", "snipped", "micro_compacted", "persisted")


def _compare(transcript, policy, reference: Seed000) -> int:
    run = replay(transcript, policy)
    expected = reference.run(transcript.messages)
    assert len(run.calls) == len(expected) == len(transcript.call_positions)
    for rec, exp in zip(run.calls, expected):
        got = {k: getattr(rec, k) for k in FIELDS}
        assert got == exp, f"call {rec.call}"
    return len(expected)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_s08_matches_seed000_on_synthetic_sessions(tmp_path, seed):
    path = write_jsonl(tmp_path / "s.jsonl", list(generate(150, seed)))
    t = load_transcript(str(path))
    assert _compare(t, load_policy("s08"), Seed000()) == 150


def test_s08_matches_seed000_with_reactive_compactions(tmp_path):
    # a small window makes the reactive path run (the default 200,000 tokens is rarely reached)
    path = write_jsonl(tmp_path / "s.jsonl", list(generate(120, 5)))
    t = load_transcript(str(path))
    policy = load_policy("s08", ["reactive.window_tokens=9000"])
    run = replay(t, policy)
    assert run.summary.reactive > 0
    _compare(t, policy, Seed000(window_tokens=9000))


@pytest.mark.parametrize("name", ["synth-long.jsonl", "huge-batch.jsonl", "manual-compact.jsonl"])
def test_s08_matches_seed000_on_samples(name):
    t = load_transcript(str(SAMPLES / name))
    assert _compare(t, load_policy("s08"), Seed000()) == len(t.call_positions)

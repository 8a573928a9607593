from __future__ import annotations

from collections import Counter

from compactlab.synth import generate


def test_synthetic_sessions_have_what_real_ones_have():
    msgs = list(generate(600, 1))
    assert sum(m["role"] == "assistant" for m in msgs) == 600
    batches = Counter()
    has = Counter()
    for m in msgs:
        c = m["content"]
        if m["role"] == "assistant":
            uses = [b for b in c if b["type"] == "tool_use"]
            batches[len(uses)] += 1
            has["compact"] += any(b["name"] == "compact" for b in uses)
        elif isinstance(c, list):
            tool_results = [b for b in c if b["type"] == "tool_result"]
            total = sum(len(b["content"]) if isinstance(b["content"], str) else len(b["content"][0]["text"]) for b in tool_results)
            has["over_200k_batch"] += total > 200_000
            has["list_form"] += any(isinstance(b["content"], list) for b in tool_results)
            has["error"] += any(b.get("is_error") for b in tool_results)
            has["prompt"] += any(b["type"] == "text" for b in c)
    assert max(batches) >= 5 and batches[1] > batches[2]
    for key in ("compact", "over_200k_batch", "list_form", "error", "prompt"):
        assert has[key] > 0, key


def test_same_seed_same_transcript():
    assert list(generate(50, 3)) == list(generate(50, 3)) != list(generate(50, 4))


def test_a_recording_with_usage_is_loaded_and_calibrated_on_it(tmp_path):
    """``synth.write(usage=True)``: the replies as API response objects whose usage is what the API
    would count (3,000 tokens of overhead, 3.7 characters a token): a calibration finds that again."""
    from compactlab import load_transcript
    from compactlab.corpus.calibration import calibrate
    from compactlab.synth import write

    path = tmp_path / "rec.jsonl"
    write(path, 60, seed=3, usage=True)
    t = load_transcript(str(path))
    plain = tmp_path / "plain.jsonl"
    write(plain, 60, seed=3)
    assert [e.message for e in t.entries] == [e.message for e in load_transcript(str(plain)).entries]
    assert len(t.usage) == 60 and t.model == "claude-sonnet-4-5"
    cal = calibrate(t)
    assert abs(cal.chars_per_token - 3.7) < 0.01 and abs(cal.overhead_tokens - 3000) <= 5 and cal.mape < 0.001


def test_a_recording_written_as_a_claude_code_session_is_the_same_recording(tmp_path):
    """``synth.write(form="claude-code")``: the recording as Claude Code writes a session (a reply a
    line per block, in envelopes): detected as one, and loaded it is the recording, usage and all."""
    from compactlab import load_transcript
    from compactlab.synth import write
    from compactlab.transcripts import detect_format

    session, recording = tmp_path / "cc.jsonl", tmp_path / "rec.jsonl"
    write(session, 60, seed=3, form="claude-code")
    write(recording, 60, seed=3, usage=True)
    assert detect_format(str(session)) == "claude-code"
    a, b = load_transcript(str(session)), load_transcript(str(recording))
    assert [e.message for e in a.entries] == [e.message for e in b.entries]
    assert a.usage == b.usage and len(a.usage) == 60 and a.model == b.model
    assert sum(1 for _ in session.open()) > sum(1 for _ in recording.open())  # (a reply's blocks: a line each)

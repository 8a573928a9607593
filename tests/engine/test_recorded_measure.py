"""A trigger measured as the harness measured it follows the recording only while the replay sends
what the recording sent (#29 §3): past a recorded compaction the replay drops, it measures the
replayed context instead, and fires where the harness would have."""

from __future__ import annotations

import orjson

from compactlab.transcripts.writer import COMPACTION_KEY
from helpers import tool_session, write_jsonl


def session_with_a_recorded_compaction(tmp_path, at: int = 20, calls: int = 40):
    """Usage that mirrors chars / 4 of the history until call ``at``, where the recording compacted
    (its usage after that measures a small context); the file's history goes on uncompacted."""
    lines, chars, call = [], 0, 0
    for m in tool_session(calls, 3000):
        if m["role"] == "assistant":
            if call == at:
                lines.append({"role": "user", "content": "summary of the work so far", COMPACTION_KEY: {"trigger": "auto"}})
                base = chars
            prompt = chars // 4 if call < at else 500 + (chars - base) // 4
            m = {"type": "message", **m, "model": "claude-sonnet-4-5", "usage": {"input_tokens": prompt, "output_tokens": 5}}
            call += 1
        chars += len(orjson.dumps(m))
        lines.append(m)
    return write_jsonl(tmp_path / "t.jsonl", lines)


def run(cli, path, *sets):
    args = [a for s in ("summary.unit=tokens", "summary.measure=recorded", *sets) for a in ("--set", s)]
    r = cli("replay", path, "-p", "s08", "--no-calibrate", "--dry-run", "--format", "json-run",
            "--set", "snip.enabled=false", "--set", "micro.enabled=false", "--set", "budget.enabled=false",
            "--set", "manual.enabled=false", *args)
    assert r.exit_code == 0, r.output
    doc = orjson.loads(r.stdout)
    return [c["call"] for c in doc["calls"] if c["summarized"]], doc["calls"]


def test_past_a_dropped_recorded_compaction_the_trigger_measures_the_replay(cli, tmp_path):
    path = session_with_a_recorded_compaction(tmp_path)
    _, calls = run(cli, path, "summary.trigger=10000000")  # never fires: where does the estimate cross?
    trigger = calls[30]["tokens"]
    crossing = next(c["call"] for c in calls if c["tokens"] > trigger)
    fired, _ = run(cli, path, f"summary.trigger={trigger}")
    # the recording's own usage after call 20 is a small context: followed, it would never fire
    assert fired and abs(fired[0] - crossing) <= 2 and fired[0] > 20, (fired, crossing)

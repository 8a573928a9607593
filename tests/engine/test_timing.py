"""When to compact, given the prompt cache (#29 §6): at the trigger; also at the first call after
an idle gap longer than the cache's lifetime (idle); or also at the last call before one
(before_expiry). compare's verdict names what timing alone saves."""

from __future__ import annotations

import orjson

from helpers import tool_session, write_jsonl


def with_a_long_gap(tmp_path, gap_before: int = 16, calls: int = 24):
    """Calls a minute apart, but an hour and a half between call gap_before - 1 and gap_before."""
    lines, call, t = [], 0, 0
    for m in tool_session(calls, 8000):
        if m["role"] == "assistant":
            t += 5400 if call == gap_before else 60
            m = {"type": "message", **m, "model": "claude-sonnet-4-5", "usage": {"input_tokens": 1000, "output_tokens": 9},
                 "timestamp": f"2026-01-01T{t // 3600:02d}:{t % 3600 // 60:02d}:{t % 60:02d}Z"}
            call += 1
        lines.append(m)
    return write_jsonl(tmp_path / "gap.jsonl", lines)


def fired(cli, path, timing, *sets):
    r = cli("replay", path, "-p", "s08", "--no-calibrate", "--dry-run", "--format", "json-run",
            *[a for s in ("snip.enabled=false", "micro.enabled=false", "budget.enabled=false", "manual.enabled=false",
                          "summary.unit=tokens", "summary.trigger=40000", "summary.early_trigger=15000",
                          f"summary.timing={timing}", *sets) for a in ("--set", s)])
    assert r.exit_code == 0, r.output
    doc = orjson.loads(r.stdout)
    return [c["call"] for c in doc["calls"] if c["summarized"]], doc["summary"]


def test_each_timing_compacts_where_it_says(cli, tmp_path):
    path = with_a_long_gap(tmp_path)
    at_trigger, s = fired(cli, path, "trigger")
    assert s["cache_expired_calls"] == 1 and at_trigger and at_trigger[0] > 16  # the trigger comes later
    idle, _ = fired(cli, path, "idle")
    assert idle[0] == 16  # the first call after the gap: the cache is cold anyway
    before, _ = fired(cli, path, "before_expiry")
    assert before[0] == 15  # the last call before it, while the summary request could read the cache
    # under the early trigger, a cold cache is no reason: nothing fires early
    late, _ = fired(cli, path, "idle", "summary.early_trigger=39000")
    assert late == at_trigger


def test_the_verdict_names_what_timing_alone_saves(cli, tmp_path):
    path = with_a_long_gap(tmp_path)
    sets = ("snip.enabled=false", "micro.enabled=false", "budget.enabled=false", "manual.enabled=false",
            "summary.unit=tokens", "summary.trigger=40000", "summary.early_trigger=15000")
    r = cli("compare", path, "-p", "s08", "--no-calibrate", "--dry-run", "--format", "json",
            *[a for s in sets for a in ("--set", s)], "--sweep", "summary.timing=trigger,idle,before_expiry")
    assert r.exit_code == 0, r.output
    text = orjson.loads(r.stdout)["verdict"]["recommendation"]
    assert "Timing alone:" in text and "than s08 summary.timing=trigger" in text

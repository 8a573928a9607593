"""Amp threads (#61): Anthropic-style blocks, Amp's own tool results (run.status/result/error),
per-message usage with the cache split, an OpenAI model's cache-creation tokens as input."""

from __future__ import annotations

from pathlib import Path

import pytest

from compactlab import load_policy, load_transcript, replay
from compactlab.transcripts import detect_format
from compactlab.transcripts.amp import result_text

DATA = Path(__file__).parent / "data" / "amp"


def test_the_public_fixtures_load():
    t = load_transcript(str(DATA / "agentsview-tooluse.json"))
    assert t.format == "amp" and detect_format(str(DATA / "agentsview-tooluse.json")) == "amp"
    assert [b["type"] for b in t.entries[1].message["content"]] == ["thinking", "text", "tool_use"]
    assert t.entries[2].message["content"] == [{"type": "tool_result", "tool_use_id": "tu1", "content": "package main"}]
    assert replay(t, load_policy("none")).summary.violations == []
    u = load_transcript(str(DATA / "ccusage-usage.json"))
    first, second = (u.usage[p] for p in u.call_positions)
    assert first == {"input_tokens": 10, "cache_read_input_tokens": 11372, "cache_creation_input_tokens": 986,
                     "output_tokens": 178, "model": "claude-haiku-4-5-20251001", "timestamp": "2026-01-19T11:42:10.652Z"}
    assert second["cache_read_input_tokens"] == 12000


def test_amps_own_results_and_an_openai_models_input():
    t = load_transcript(str(DATA / "built-run-results.json"))
    assert t.title == "Fix the failing build" and t.metadata["project"] == "webapp"
    results = t.entries[2].message["content"]
    assert results == [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "error TS2307: Cannot find module 'zod'"},
                       {"type": "tool_result", "tool_use_id": "toolu_2", "content": "EACCES", "is_error": True}]
    assert t.entries[4].message["content"][0]["content"] == "src/a.ts:1:import { z } from 'zod'\nsrc/b.ts:3:zod"
    claude, gpt, _ = (t.usage[p] for p in t.call_positions)
    assert claude["cache_creation_input_tokens"] == 8000  # (Anthropic's: cache writes)
    assert (gpt["input_tokens"], gpt["cache_creation_input_tokens"]) == (900, 0)  # (OpenAI's: uncached input)
    assert replay(t, load_policy("s08")).summary.violations_introduced == 0


@pytest.mark.parametrize("value, text", [
    ("some text", "some text"), (None, ""), (True, "true"), ({"output": "hello\n", "exitCode": 0}, "hello\n"),
    ({"absolutePath": "/a/b", "content": "file data"}, "file data"), ({"diff": "--- a"}, "--- a"),
    ({"success": True}, "success"), ({"success": False}, "failed"), ({"foo": "bar"}, '{"foo":"bar"}'),
    (["/a:1:x", "/b:2:y"], "/a:1:x\n/b:2:y"), ([], ""), ({"output": None, "content": "fallback"}, "fallback"),
])
def test_a_result_reads_as_amps_readers_read_it(value, text):
    """The cases of agentsview's TestSerializeAmpResult (MIT)."""
    assert result_text(value) == text


def test_an_amp_home_is_found(tmp_path):
    from compactlab.transcripts.homes import find

    threads = tmp_path / "home" / ".local" / "share" / "amp" / "threads"
    threads.mkdir(parents=True)
    (threads / "T-019ca26f.json").write_bytes((DATA / "built-run-results.json").read_bytes())
    [found] = [h for h in find(env={"HOME": str(tmp_path / "home")}) if h.harness == "amp"]
    assert [Path(p).name for p in found.kept] == ["T-019ca26f.json"]


def test_a_thread_written_on_one_line_is_found_too(tmp_path):
    import json

    one = tmp_path / "T-one.json"
    one.write_text(json.dumps(json.loads((DATA / "built-run-results.json").read_text())))
    assert detect_format(str(one)) == "amp" and len(load_transcript(str(one)).call_positions) == 3

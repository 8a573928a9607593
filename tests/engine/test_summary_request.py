"""Compaction's own request, as each harness makes it (#29 §2): a fresh request of the cut input,
uncached (the seed designs), or the conversation as sent plus an instruction, which reads the
prompt cache (Claude Code, Codex); its cost is shown apart and is part of the policy's cost."""

from __future__ import annotations

import orjson
import pytest

from compactlab import load_policy, load_transcript, replay
from helpers import SAMPLES, SHARED


def test_a_prefix_request_reads_the_conversation_from_the_cache_and_costs_less():
    t = load_transcript(str(SAMPLES / "synth-medium.jsonl"))
    fresh = replay(t, load_policy("s08")).summary
    prefix = replay(t, load_policy("s08", ["summary.request=prefix"])).summary
    assert fresh.summary_request == "fresh" and fresh.summary_cache_read_tokens == 0
    assert prefix.summaries == fresh.summaries > 0 and prefix.summary_request == "prefix"
    # the whole conversation is the request (more tokens than the cut input), most of it read
    assert prefix.summary_input_tokens > fresh.summary_input_tokens
    assert 0 < prefix.summary_cache_read_tokens < prefix.summary_input_tokens  # what the previous call sent
    # what it costs: reads at the cached price, the rest written, the output at the output price
    p = load_policy("s08")  # (the sample names no model: the default's prices)
    from compactlab.engine.cost.prices import load_prices

    prices = load_prices().lookup("claude-sonnet-4-5")
    want = (prices.input_cost(prefix.summary_cache_read_tokens,
                              prefix.summary_input_tokens - prefix.summary_cache_read_tokens, prefix.cache_ttl)
            + prefix.summary_output_tokens * prices.output / 1e6)
    assert prefix.summary_cost_usd == pytest.approx(want, rel=1e-4) and p is not None
    assert fresh.summary_cost_usd == pytest.approx(
        (fresh.summary_input_tokens * prices.input + fresh.summary_output_tokens * prices.output) / 1e6, rel=1e-4)
    # and the policy's cost includes it
    assert prefix.cost_usd - fresh.cost_usd == pytest.approx(prefix.summary_cost_usd - fresh.summary_cost_usd, abs=1e-6)


def test_the_replay_shows_compactions_own_cost(cli):
    r = cli("replay", SAMPLES / "synth-medium.jsonl", "--dry-run")
    assert "compaction's own cost" in r.stdout and "fresh requests, uncached" in r.stdout


def test_claude_codes_compaction_request_reads_what_the_real_one_read(cli):
    """The shared session whose compaction Claude Code made: its summarizer call (the acompact
    subagent) read 166,758 tokens from the cache. The claude-code preset's summary request, on the
    same session, reads within 5% of that, and costs about the $0.11 it cost (not $0.47 fresh)."""
    folder = SHARED / "transcripts" / "claude_code" / "spotter-compactions"
    session = folder / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
    acompact = sorted((folder / "8463c716-a2ea-4c14-9efa-87158ebd9f20" / "subagents").glob("agent-acompact-*.jsonl"))
    if not session.is_file() or not acompact:
        pytest.skip("../shared/transcripts is not beside the project")
    real = next(iter(load_transcript(str(acompact[0])).usage.values()))
    r = cli("replay", session, "-p", "claude-code", "--dry-run", "--format", "json")
    s = orjson.loads(r.stdout)["runs"][0]["summary"]
    assert s["summaries"] == 1 and s["summary_request"] == "prefix"
    assert s["summary_cache_read_tokens"] == pytest.approx(real["cache_read_input_tokens"], rel=0.05)
    assert 0.08 < s["summary_cost_usd"] < 0.15

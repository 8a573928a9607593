"""The vendor presets and the layer options they brought."""

from __future__ import annotations

import json

import pytest

from compactlab import load_policy, load_transcript, replay
from compactlab.errors import PolicyError
from compactlab.engine.layers import NOTHING, RunEnv, micro
from compactlab.engine.policy import MicroConfig
from compactlab.summarizers import StubSummarizer
from helpers import SAMPLES, asst, context, results, tool_session, tr, tu, user, write_jsonl

VENDOR = ["claude-code", "codex", "gemini-cli", "opencode", "goose", "anthropic-clear-tool-uses", "openhands",
          "observation-masking", "pi", "qwen-code"]


@pytest.mark.parametrize("preset", VENDOR)
def test_vendor_presets_run_on_every_sample_without_introduced_violations(preset):
    policy = load_policy(preset)
    assert "(" in policy.description or "'" in policy.description  # each names its source
    n = 0
    for path in sorted(SAMPLES.glob("*.jsonl")):
        s = replay(load_transcript(str(path)), policy).summary
        assert s.violations_introduced == 0, path.name
        n += 1
    assert n == 7


def test_vendor_presets_appear_in_compare(cli):
    args = [a for p in VENDOR for a in ("-p", p)]
    rows = json.loads(cli("compare", SAMPLES / "synth-long.jsonl", *args, "--dry-run", "--format", "json").stdout)["runs"]
    assert sorted(r["policy"] for r in rows) == sorted([*VENDOR, "none"])  # no compaction: the reference
    rows = [r for r in rows if r["policy"] != "none"]
    # (qwen-code compresses once, at 70% of 200,000, keeping the newest 30%: late on this transcript)
    assert all(r["reduction"] > (0.05 if r["policy"] == "qwen-code" else 0.5) for r in rows), rows


def test_vendor_constants():
    cc = load_policy("claude-code")
    assert (cc.summary.trigger, cc.summary.unit, cc.micro.keep_recent) == (167_000, "tokens", 5)
    assert cc.micro.placeholder == "[Old tool result content cleared]" and cc.budget.preview_chars == 2000
    api = load_policy("anthropic-clear-tool-uses")
    assert (api.micro.trigger_tokens, api.micro.keep_recent, api.summary.enabled) == (100_000, 3, False)
    oh = load_policy("openhands")
    assert (oh.summary.unit, oh.summary.trigger, oh.summary.keep_head, oh.summary.keep_tail) == ("messages", 120, 4, 55)
    om = load_policy("observation-masking")
    assert (om.micro.keep_by, om.micro.keep_recent) == ("turns", 10)


def env() -> RunEnv:
    return RunEnv(summarizer=StubSummarizer())


def test_micro_trigger_tokens():
    ctx = context(tool_session(6, size=2000))  # ~3,000 tokens
    assert micro(ctx, MicroConfig(trigger_tokens=10_000), env())[1].micro_compacted == 0
    assert micro(ctx, MicroConfig(trigger_tokens=1_000), env())[1].micro_compacted == 3


def test_micro_clear_at_least():
    ctx = context(tool_session(5, size=400))  # two old results: ~2 x 87 tokens freed
    assert micro(ctx, MicroConfig(clear_at_least=1000), env())[1].micro_compacted == 0
    out, stats = micro(ctx, MicroConfig(clear_at_least=100), env())
    assert stats.micro_compacted == 2


def test_micro_clear_inputs():
    msgs = tool_session(4, size=400)
    out, stats = micro(context(msgs), MicroConfig(keep_recent=1, clear_inputs=True), env())
    inputs = [b["input"] for m in out.messages if m["role"] == "assistant" for b in m["content"] if b["type"] == "tool_use"]
    assert inputs == [{}, {}, {}, {"command": "cmd 3"}]
    assert stats.lowest_changed == 1


def test_micro_keep_by_turns():
    # one turn with three parallel results, then two single turns: keep the last 2 turns' results
    msgs = [user("go"), asst(tu("a"), tu("b"), tu("c")), results(tr("a", "x" * 300), tr("b", "x" * 300), tr("c", "x" * 300)),
            asst(tu("d")), results(tr("d", "y" * 300)), asst(tu("e")), results(tr("e", "z" * 300))]
    out, stats = micro(context(msgs), MicroConfig(keep_recent=2, keep_by="turns"), env())
    assert stats.micro_compacted == 3
    by_results, s2 = micro(context(msgs), MicroConfig(keep_recent=2), env())
    assert s2.micro_compacted == 3  # a, b, c: here the same; with keep 3 they differ
    assert micro(context(msgs), MicroConfig(keep_recent=3, keep_by="turns"), env())[1].micro_compacted == 0
    assert micro(context(msgs), MicroConfig(keep_recent=3), env())[1].micro_compacted == 2


def test_exclude_tools_is_preserve_tools():
    assert load_policy("s08", ['micro.exclude_tools=["Read"]']).micro.preserve_tools == ["Read"]
    with pytest.raises(PolicyError, match="unknown key"):
        load_policy("s08", ["micro.exclude=[\"x\"]"])


def test_summary_by_messages(tmp_path):
    t = load_transcript(str(write_jsonl(tmp_path / "t.jsonl", tool_session(70, size=50))))
    run = replay(t, load_policy("openhands"))
    assert run.summary.summaries >= 1 and run.summary.violations_introduced == 0
    assert max(c.messages for c in run.calls) <= 121
    with pytest.raises(PolicyError, match="must be smaller than a trigger in messages"):
        load_policy("openhands", ["summary.keep_tail=200"])


@pytest.mark.parametrize("harness,pattern", [("claude-code", "claude_code/*/*.jsonl"), ("codex", "codex/*.jsonl")])
def test_the_harness_presets_compact_where_the_harness_did(shared_transcripts, harness, pattern):
    """#19 §4: replayed with its harness's preset (calibrated, the default), every shared session
    that recorded an automatic compaction gets its first summary within 2 calls of the call the
    recording compacted before."""
    from compactlab.corpus.calibration import by_default

    checked = 0
    for path in sorted(shared_transcripts.glob(pattern)):
        t = load_transcript(str(path))
        auto = [c for c in t.compactions if c.trigger == "auto"]
        if not auto:
            continue
        recorded_call = next(i for i, p in enumerate(t.call_positions) if p >= auto[0].position)
        cal, _ = by_default(t)
        run = replay(t, load_policy(harness), calibration=cal)
        fired = next(c.call for c in run.calls if c.summarized)
        assert abs(fired - recorded_call) <= 2, (path.name, fired, recorded_call)
        assert run.summary.violations_introduced == 0
        checked += 1
    if not checked:
        pytest.skip(f"no shared {harness} session recorded an automatic compaction")


def test_a_token_trigger_can_measure_as_the_harness_did(tmp_path):
    """summary.measure = "recorded": the previous call's recorded prompt and output tokens plus the
    messages since, while the context is the recording's; micro.idle_minutes: only after a gap."""
    from compactlab import load_policy, load_transcript, replay
    from helpers import results, tr, user, write_jsonl

    msgs = [user("go")]
    for i, (prompt, at) in enumerate([(1000, "10:00"), (5000, "10:01"), (9000, "11:30"), (9500, "11:31")]):
        msgs.append({"type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                     "content": [{"type": "tool_use", "id": f"t{i}", "name": "bash", "input": {}}],
                     "usage": {"input_tokens": prompt, "output_tokens": 10}, "timestamp": f"2026-01-01T{at}:00Z"})
        msgs.append(results(tr(f"t{i}", "x" * 400)))
    path = write_jsonl(tmp_path / "t.jsonl", msgs[:-1])
    sets = ["summary.trigger=8000", "summary.unit=tokens", "micro.enabled=false", "budget.enabled=false"]
    by_estimate = replay(load_transcript(str(path)), load_policy("claude-code", sets + ["summary.measure=estimate"]))
    assert by_estimate.summary.summaries == 0  # a few hundred chars: far under 8,000 by the estimate
    recorded = replay(load_transcript(str(path)), load_policy("claude-code", sets + ["summary.measure=recorded"]))
    assert [c.call for c in recorded.calls if c.summarized] == [3]  # 9,000 + 10 recorded before call 3
    idle = replay(load_transcript(str(path)), load_policy("claude-code", [
        "micro.enabled=true", "micro.idle_minutes=60", "micro.keep_recent=1", "summary.enabled=false"]))
    assert [c.call for c in idle.calls if c.micro_compacted] == [2]  # 89 minutes after call 1


def test_vendor_constants_of_the_new_harnesses():
    codex = load_policy("codex")
    assert (codex.summary.trigger, codex.summary.keep_user_tokens, codex.summary.count_reasoning) == (244_800, 20_000, True)
    gem = load_policy("gemini-cli")
    assert (gem.summary.trigger, gem.summary.keep_tail_fraction, gem.micro.protect_tokens, gem.micro.clear_at_least) == (
        524_288, 0.3, 50_000, 30_000)
    oc = load_policy("opencode")
    assert (oc.micro.protect_tokens, oc.micro.clear_at_least, oc.micro.keep_recent, oc.micro.keep_by) == (
        40_000, 20_000, 2, "user_turns")
    assert load_policy("goose").summary.trigger == 160_000


def test_micro_protect_tokens_keeps_the_newest_tool_tokens():
    ctx = context(tool_session(10, size=400))  # 10 results of ~100 tokens at 4 chars a token
    # the newest 250 tokens: two results whole; the third crosses the budget and goes with the older
    out, stats = micro(ctx, MicroConfig(keep_recent=0, protect_tokens=250), env())
    assert stats.micro_compacted == 8
    kept = [b["content"] for m in out.messages if m["role"] == "user" for b in m["content"]
            if isinstance(b, dict) and b.get("type") == "tool_result"]
    assert [len(c) > 300 for c in kept] == [False] * 8 + [True] * 2
    # with clear_at_least it waits until enough is prunable
    assert micro(ctx, MicroConfig(keep_recent=0, protect_tokens=250, clear_at_least=5000), env())[1] is NOTHING


def test_micro_user_turns_and_at_prompts():
    msgs = [user("first"), asst(tu("a")), results(tr("a", "x" * 300)), asst(tu("b")), results(tr("b", "x" * 300)),
            asst("done"), user("second"), asst(tu("c")), results(tr("c", "y" * 300))]
    # keep the last user turn: the results since "second" stay, a and b go
    assert micro(context(msgs), MicroConfig(keep_recent=1, keep_by="user_turns"), env())[1].micro_compacted == 2
    assert micro(context(msgs), MicroConfig(keep_recent=2, keep_by="user_turns"), env())[1].micro_compacted == 0
    waiting = env()
    assert micro(context(msgs), MicroConfig(keep_recent=1, keep_by="user_turns", at_prompts=True), waiting)[1] is NOTHING
    waiting.now = waiting.now._replace(after_prompt=True)
    assert micro(context(msgs), MicroConfig(keep_recent=1, keep_by="user_turns", at_prompts=True),
                 waiting)[1].micro_compacted == 2


def test_summary_keep_user_tokens_keeps_only_the_newest_prompts(tmp_path):
    """Codex's compacted history: the newest user prompts up to the budget (the one crossing it cut
    in the middle), then the summary; no assistant or tool message."""
    from compactlab.engine.layers import summary
    from compactlab.engine.policy import SummaryConfig

    msgs = [user("a" * 400), asst(tu("x")), results(tr("x", "r" * 900)), asst("ok"), user("b" * 400), asst(tu("y")),
            results(tr("y", "s" * 900))]
    out, stats = summary(context(msgs), SummaryConfig(trigger=1, keep_user_tokens=150), env())
    assert stats.summaries == 1 and len(out) == 1
    texts = [b["text"] for b in out.messages[0]["content"]]
    assert texts[1] == "b" * 400 and len(texts) == 3  # "b" whole (100 tokens), "a" cut to the 50 left
    assert texts[0].startswith("a" * 100) and "tokens truncated" in texts[0] and texts[0].endswith("a" * 100)
    assert texts[2].startswith("[Compacted]")


def test_summary_keep_tail_fraction_cuts_before_a_prompt_and_rolls_back_growth():
    from compactlab.engine.layers import summary
    from compactlab.engine.policy import SummaryConfig

    msgs = [user("u1"), asst(tu("a")), results(tr("a", "x" * 4000)), asst("fine"), user("u2"), asst(tu("b")),
            results(tr("b", "y" * 1000)), asst("fine"), user("u3"), asst(tu("c")), results(tr("c", "z" * 300))]
    out, stats = summary(context(msgs), SummaryConfig(trigger=1, keep_tail_fraction=0.3), env())
    assert stats.summaries == 1
    assert out.messages[1:] == msgs[4:]  # u2 is the first prompt with 70% of the characters before it
    # a summary of a small head that is larger than it: undone, counted as a failure
    big = SummaryConfig(trigger=1, keep_tail_fraction=0.3, rollback_if_larger=True, template="{summary}" + "!" * 9000)
    run_env = env()
    same, st = summary(context(msgs), big, run_env)
    assert same.messages == msgs and st.summary_failures == 1 and st.summaries == 0
    assert run_env.ledger.failed_summaries[0]["error"].startswith("the summary would not shrink")


def test_codex_counts_the_reasoning_of_earlier_turns():
    from compactlab.engine.layers.summary import EarlierReasoning

    def thinking(n: int) -> dict:
        return {"role": "assistant", "content": [{"type": "thinking", "thinking": "", "signature": "·" * n},
                                                 {"type": "text", "text": "ok"}]}

    msgs = [user("one"), thinking(4000), user("two"), thinking(8000)]
    # only the reasoning before the last prompt counts: (4000 x 3/4 - 650) / 4 = 588 (rounded up)
    assert EarlierReasoning().tokens(context(msgs)) == 588
    assert EarlierReasoning().tokens(context(msgs[:2])) == 0


@pytest.mark.parametrize("preset", ["claude-code", "codex"])
def test_the_recorded_measure_stops_once_a_layer_changed_the_context(tmp_path, preset):
    """(#25 §8) The harness's own measure (the recorded usage plus the messages since) holds only while
    the replay sends what the recording sent: once a layer cleared a result, the trigger measures
    the replay's own context (here far under the trigger: no summary where the recording's usage
    would have fired one)."""
    from compactlab import load_policy, load_transcript, replay
    from helpers import results, tr, user, write_jsonl

    msgs = [user("go")]
    for i, prompt in enumerate([1000, 5000, 9000, 9500]):
        msgs.append({"type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                     "content": [{"type": "tool_use", "id": f"t{i}", "name": "bash", "input": {}}],
                     "usage": {"input_tokens": prompt, "output_tokens": 10}, "timestamp": f"2026-01-01T10:0{i}:00Z"})
        msgs.append(results(tr(f"t{i}", "x" * 400)))
    t = load_transcript(str(write_jsonl(tmp_path / "t.jsonl", msgs[:-1])))
    sets = ["summary.trigger=8000", "summary.unit=tokens", "summary.measure=recorded", "budget.enabled=false",
            "summary.count_reasoning=false", "summary.keep_user_tokens=0"]
    as_recorded = replay(t, load_policy(preset, sets + ["micro.enabled=false"]))
    assert [c.call for c in as_recorded.calls if c.summarized] == [3]
    cleared = replay(t, load_policy(preset, sets + ['order=["micro"]', "micro.enabled=true", "micro.idle_minutes=0",
                                                   "micro.keep_recent=1", "micro.min_chars=0"]))
    assert [c.call for c in cleared.calls if c.micro_compacted][:1] == [2]
    assert not any(c.summarized for c in cleared.calls)

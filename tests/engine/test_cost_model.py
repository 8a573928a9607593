"""The prompt-cache model and the pricing of a run, as units: no replay needed."""

from __future__ import annotations

from collections import Counter
from itertools import accumulate, product

import orjson

import pytest
from hypothesis import given, settings, strategies as st

from compactlab import core
from compactlab.engine.context import Context
from compactlab.engine.cost.pricing import PromptCache, price_calls
from compactlab.engine.cost.prices import load_prices
from compactlab.engine.measures.violations import InvariantTracker, ViolationLog
from compactlab.transcripts.messages import make_entry
from compactlab.engine.records import PythonTurnRecord, TurnRecord
from compactlab.engine.measures.retention import retained
from compactlab.engine.sizing import TokenEstimator, list_chars
from helpers import SAMPLES, asst, context, results, tr, tu, user, examples


def entries(n: int, size: int = 400) -> list:
    return [make_entry(user("x" * size) if i % 2 == 0 else asst("y" * size), i) for i in range(n)]


def sizes(es: list) -> tuple[int, int]:
    chars_sum = sum(e.chars for e in es)
    return chars_sum, list_chars(chars_sum, len(es))


def test_the_first_call_reads_nothing_and_an_unchanged_prefix_is_read():
    est = TokenEstimator(4.0, 0)
    cache = PromptCache(est)
    es = entries(4)
    tokens = est.tokens(sizes(es)[1])
    assert cache.account(Context(es), cache.unchanged(None), tokens) == (0, tokens)
    cache.sent(len(es), tokens)
    grown = es + entries(2)
    grown_tokens = est.tokens(sizes(grown)[1])
    read, write = cache.account(Context(grown), cache.unchanged(None), grown_tokens)
    prefix = list_chars(sum(e.chars for e in es), 4)
    assert read == est.tokens(prefix) and read + write == grown_tokens


def test_a_change_inside_the_prefix_reads_only_up_to_it():
    est = TokenEstimator(4.0, 0)
    cache = PromptCache(est)
    es = entries(6)
    cache.sent(6, est.tokens(sizes(es)[1]))
    assert cache.unchanged(2) == 2 and cache.unchanged(None) == 6 and cache.unchanged(9) == 6
    tokens = est.tokens(sizes(es)[1])
    read, _ = cache.account(Context(es), 2, tokens)
    assert read == est.tokens(list_chars(sum(e.chars for e in es[:2]), 2))


def test_a_change_at_position_0_reads_the_overhead_only():
    est = TokenEstimator(4.0, 700)
    cache = PromptCache(est)
    cache.sent(5, 5000)
    es = entries(3)
    assert cache.account(Context(es), 0, 2000) == (700, 1300)
    assert cache.account(Context(es), 0, 300) == (300, 0)  # never more than is sent


def test_never_more_is_read_than_the_previous_call_sent():
    est = TokenEstimator(4.0, 0)
    cache = PromptCache(est)
    es = entries(8)
    cache.sent(8, 10)  # the previous call sent only 10 tokens
    read, write = cache.account(Context(es), 8, 900)
    assert read == 10 and write == 890


def test_exact_counts_read_their_share_of_the_prefix_by_chars():
    cache = PromptCache(TokenEstimator(4.0, 0), exact=True)
    es = entries(4)
    chars_sum, chars = sizes(es)
    cache.sent(4, 10_000)
    read, _ = cache.account(Context(es), 2, 1000)
    assert read == round(1000 * list_chars(sum(e.chars for e in es[:2]), 2) / chars)


def test_price_calls_prices_each_record_and_the_raw_baseline():
    prices = load_prices().lookup("claude-sonnet-4-5")
    records = [TurnRecord(call=i, message_index=2 * i, raw_messages=2 * i, raw_chars=0, raw_tokens=t,
                          tokens=t // 2, cache_read_tokens=r, cache_write_tokens=t // 2 - r)
               for i, (t, r) in enumerate([(1000, 0), (3000, 400), (5000, 1400)])]
    raw = price_calls(records, prices).raw
    assert [r.input_cost_usd for r in records] == [prices.input_cost(r.cache_read_tokens, r.cache_write_tokens)
                                                   for r in records]
    expected = prices.input_cost(0, 1000) + prices.input_cost(1000, 2000) + prices.input_cost(3000, 2000)
    assert raw == pytest.approx(expected)


def test_the_violation_log_counts_per_call_and_lists_each_once():
    log = ViolationLog()
    tracker = InvariantTracker()
    msgs = [user("go"), asst(tu("a"), tu("b")), results(tr("a"))]
    es = [make_entry(m, i) for i, m in enumerate(msgs)]
    tracker.update(es, 0)
    assert log.record(0, tracker, Counter()) == (1, 0)  # orphan b, not in the raw context
    assert log.record(1, tracker, Counter({("orphan_tool_use", "b"): 1})) == (0, 1)  # now inherited
    assert log.record(2, tracker, Counter()) == (1, 0)  # introduced again: listed once already
    assert log.listed() == [
        {"kind": "orphan_tool_use", "call": 0, "message_index": 1, "tool_use_id": "b", "introduced": True},
        {"kind": "orphan_tool_use", "call": 1, "message_index": 1, "tool_use_id": "b", "introduced": False}]
    assert ViolationLog().record(0, InvariantTracker(), Counter()) == (0, 0)


def test_retained_counts_the_referenced_results_still_intact():
    ctx = context([user("go"), asst(tu("a")), results(tr("a", "content")), asst(tu("b")), results(tr("b"))])
    origin_a, origin_b = ctx.entries[2].origin, ctx.entries[4].origin
    assert retained([(origin_a, 0), (origin_b, 0)], ctx) == 2
    assert retained([(origin_a, 1)], ctx) == 1  # a block index no one changed
    assert retained([(999, 0)], ctx) == 0  # a message no longer in the context


def test_recorded_cost_prices_each_call_at_its_model_and_each_write_at_its_ttl(tmp_path):
    """Issue 17 part 3: a session mixing models, with 1-hour cache writes, is billed call by call."""
    from compactlab import load_policy, load_transcript, replay
    from compactlab.engine.cost.pricing import recorded_cost
    from helpers import write_jsonl

    def reply(model: str, usage: dict) -> dict:
        return {"type": "message", "role": "assistant", "model": model, "content": "ok", "usage": usage}

    u1 = {"input_tokens": 1000, "cache_creation_input_tokens": 5000, "cache_read_input_tokens": 0,
          "cache_creation": {"ephemeral_1h_input_tokens": 4000, "ephemeral_5m_input_tokens": 1000}}
    u2 = {"input_tokens": 200, "cache_creation_input_tokens": 300, "cache_read_input_tokens": 5000}
    path = write_jsonl(tmp_path / "t.jsonl", [user("go"), reply("claude-opus-4-5", u1), user("more"),
                                              reply("claude-haiku-4-5", u2)])
    t = load_transcript(str(path))
    assert t.usage[1]["cache_creation_1h_input_tokens"] == 4000 and t.usage[1]["model"] == "claude-opus-4-5"
    table = load_prices()
    opus, haiku = table.lookup("claude-opus-4-5"), table.lookup("claude-haiku-4-5")
    assert opus.known and haiku.known
    want = ((1000 * opus.input + 1000 * opus.cache_write_5m + 4000 * opus.cache_write_1h)
            + (200 * haiku.input + 300 * haiku.cache_write_5m + 5000 * haiku.cache_read)) / 1e6
    run = replay(t, load_policy("none"))
    assert run.summary.recorded_input_cost_usd == pytest.approx(want, abs=1e-6)
    # a forced model prices every call at it; the 1-hour writes stay at the 1-hour rate
    forced = replay(load_transcript(str(path)), load_policy("none"), prices=haiku)
    assert forced.summary.recorded_input_cost_usd == pytest.approx(
        (1000 * haiku.input + 1000 * haiku.cache_write_5m + 4000 * haiku.cache_write_1h + 200 * haiku.input
         + 300 * haiku.cache_write_5m + 5000 * haiku.cache_read) / 1e6, abs=1e-6)
    assert recorded_cost(run.calls, {}, lambda m: opus) is None


def test_convert_keeps_each_calls_model_and_its_1_hour_writes(cli, tmp_path):
    from compactlab import load_transcript
    from helpers import write_jsonl

    msgs = [user("go"), {"type": "message", "role": "assistant", "model": "claude-opus-4-5", "content": "a",
                         "usage": {"input_tokens": 1, "cache_creation_input_tokens": 9,
                                   "cache_creation": {"ephemeral_1h_input_tokens": 9}}},
            user("more"), {"type": "message", "role": "assistant", "model": "claude-haiku-4-5", "content": "b",
                           "usage": {"input_tokens": 2}}]
    src = write_jsonl(tmp_path / "src.jsonl", msgs)
    assert cli("convert", src, "-o", tmp_path / "out.jsonl", "-q").exit_code == 0
    assert load_transcript(str(tmp_path / "out.jsonl")).usage == load_transcript(str(src)).usage


def test_each_call_is_priced_at_its_model_and_a_change_of_model_reads_nothing(tmp_path):
    """Issue 17 part 1: per-call pricing; the prompt cache is per model."""
    from compactlab import load_policy, load_transcript, replay
    from compactlab.summarizers import StubSummarizer
    from helpers import write_jsonl

    def reply(model: str, i: int, read: int) -> dict:  # (a harness that caches: it wrote, and read the last prompt)
        return {"type": "message", "role": "assistant", "model": model, "content": f"reply {i} " + "x" * 400,
                "usage": {"input_tokens": 10, "cache_creation_input_tokens": 90, "cache_read_input_tokens": read}}

    msgs, previous = [user("go " * 200)], None
    for i, model in enumerate(["claude-opus-4-5", "claude-haiku-4-5", "claude-haiku-4-5", "claude-opus-4-5"]):
        msgs += [reply(model, i, 100 if model == previous else 0), user(f"more {i} " + "y" * 400)]
        previous = model
    msgs.append(reply("claude-opus-4-5", 9, 100))
    t = load_transcript(str(write_jsonl(tmp_path / "t.jsonl", msgs)))
    table = load_prices()
    opus, haiku = table.lookup("claude-opus-4-5"), table.lookup("claude-haiku-4-5")
    run = replay(t, load_policy("none"))
    calls = run.calls
    models = [opus, haiku, haiku, opus, opus]
    for c, p in zip(calls, models):
        assert c.input_cost_usd == pytest.approx(p.input_cost(c.cache_read_tokens, c.cache_write_tokens))
    assert [c.cache_read_tokens == 0 for c in calls] == [True, True, False, True, False]  # 1 and 3 change model
    assert calls[1].cache_write_tokens == calls[1].tokens and calls[2].cache_read_tokens > 0
    raw = sum(p.input_cost(r, c.raw_tokens - r) for c, p, r in zip(
        calls, models, [0, 0, calls[1].raw_tokens, 0, calls[3].raw_tokens]))
    assert run.summary.raw_cost_usd == pytest.approx(raw, abs=1e-6)
    assert run.summary.raw_cost_usd_nocache == pytest.approx(
        sum(p.nocache_cost(c.raw_tokens) for c, p in zip(calls, models)), abs=1e-6)

    class HaikuStub(StubSummarizer):
        model = "claude-haiku-4-5"

    summarized = replay(load_transcript(str(tmp_path / "t.jsonl")),
                        load_policy("s08", ["summary.trigger=500", "snip.enabled=false"]), summarizer=HaikuStub())
    s = summarized.summary
    assert s.summaries > 0
    assert s.cost_usd == pytest.approx(sum(c.input_cost_usd for c in summarized.calls)
                                       + haiku.summary_cost(s.summary_input_tokens, s.summary_output_tokens), abs=1e-6)


def test_a_call_after_the_cache_expired_reads_nothing_and_writes_are_priced_at_the_ttl(tmp_path):
    """Issue 17 part 2: cache lifetime from the recording's timestamps; the recording's TTL."""
    from compactlab import load_policy, load_transcript, replay
    from helpers import write_jsonl

    def reply(i: int, at: str, one_hour: int = 0) -> dict:
        # each call reads the previous prompt (110 tokens a call), but call 2, made after expiry
        usage = {"input_tokens": 10, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 0 if i == 2 else 110 * i}
        if one_hour:
            usage["cache_creation"] = {"ephemeral_1h_input_tokens": one_hour}
        return {"type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": f"r{i} " + "x" * 300,
                "usage": usage, "timestamp": at}

    times = ["2026-01-01T10:00:00Z", "2026-01-01T10:02:00Z", "2026-01-01T10:10:00Z", "2026-01-01T10:11:00Z"]
    msgs = [user("go " * 100)]
    for i, at in enumerate(times):
        msgs += [reply(i, at), user(f"next {i} " + "y" * 300)]
    path = write_jsonl(tmp_path / "t.jsonl", msgs[:-1])
    run = replay(load_transcript(str(path)), load_policy("none"))
    s, calls = run.summary, run.calls
    assert s.cache_ttl == "5m" and s.cache_expired_calls == 1  # 10:02 -> 10:10 is 8 minutes
    assert [c.cache_read_tokens == 0 for c in calls] == [True, False, True, False]
    assert calls[2].cache_write_tokens == calls[2].tokens
    one_hour = replay(load_transcript(str(path)), load_policy("none"), cache_ttl="1h")
    assert one_hour.summary.cache_ttl == "1h" and one_hour.summary.cache_expired_calls == 0
    p = load_prices().lookup("claude-sonnet-4-5")
    for c in one_hour.calls:  # writes at the 1-hour rate
        assert c.input_cost_usd == pytest.approx((c.cache_read_tokens * p.cache_read
                                                  + c.cache_write_tokens * p.cache_write_1h) / 1e6)
    # a recording with 1-hour writes is replayed with a 1-hour TTL
    msgs[1] = reply(0, times[0], one_hour=100)
    recorded_1h = write_jsonl(tmp_path / "h.jsonl", msgs[:-1])
    assert replay(load_transcript(str(recorded_1h)), load_policy("none")).summary.cache_ttl == "1h"
    # no timestamps: no expiry, and the summary says so
    plain = replay(load_transcript(str(SAMPLES / "synth-small.jsonl")), load_policy("none"))
    assert plain.summary.cache_expired_calls is None and plain.summary.cache_ttl == "5m"


def test_cache_ttl_is_an_option_of_the_commands_that_price(cli, tmp_path):
    r = cli("replay", SAMPLES / "synth-small.jsonl", "--cache-ttl", "1h", "--dry-run")
    assert r.exit_code == 0 and "prompt cache TTL" in r.stdout and "1h, no timestamps: no expiry" in r.stdout
    five = orjson.loads(cli("replay", SAMPLES / "synth-small.jsonl", "--dry-run", "--format", "json").stdout)
    hour = orjson.loads(cli("replay", SAMPLES / "synth-small.jsonl", "--cache-ttl", "1h", "--dry-run",
                            "--format", "json").stdout)
    assert hour["runs"][0]["summary"]["cost_usd"] > five["runs"][0]["summary"]["cost_usd"]  # writes at 2x, not 1.25x
    c = cli("compare", SAMPLES / "synth-small.jsonl", "-p", "s08", "--cache-ttl", "1h", "--dry-run", "--format", "json",
            "-q")
    assert c.exit_code == 0 and orjson.loads(c.stdout)["runs"][0]["cost_usd"] == hour["runs"][0]["summary"]["cost_usd"]
    assert cli("replay", SAMPLES / "synth-small.jsonl", "--cache-ttl", "2h", "--dry-run").exit_code == 2


def test_recorded_cache_breaks_are_what_nothing_else_explains():
    """#17 part 4: a call that reads far less than the previous call's prompt, on the same model,
    within the TTL and not after a recorded compaction, is a recorded break; call 0's read is a
    warm start."""
    from compactlab.engine.cost.pricing import recorded_breaks

    def u(read: int, fresh: int = 10, write: int = 1000, model: str = "m") -> dict:
        return {"input_tokens": fresh, "cache_creation_input_tokens": write, "cache_read_input_tokens": read,
                "model": model}

    usage = [u(5000), u(6000), u(2000),  # 2: a break (2,000 of 7,010)
             u(0), u(8000),  # 3: after 20 minutes: expiry, not a break
             u(100, model="other"),  # 5: another model
             u(50),  # 6: just after a recorded compaction
             u(40)]  # 7: a break again
    times = [0, 10, 20, 20 + 1200, 1230, 1240, 1250, 1260]
    assert recorded_breaks(usage, times, "5m", restarted={6}) == {0: 5000, 2: 2000, 7: 40}
    assert 3 in recorded_breaks(usage, None, "5m", restarted={6})  # without times, no expiry explains it
    assert recorded_breaks([u(0), u(950)], None, "5m", set()) == {}  # 94% of 1,010: the prefix, nothing changed
    assert recorded_breaks([u(0), u(850)], None, "5m", set()) == {1: 850}  # 84%: the harness rewrote a part


def test_recorded_breaks_are_replayed_in_both_contexts_and_the_first_call_reads_its_warm_start():
    def records() -> list:
        return [TurnRecord(call=i, message_index=2 * i, raw_messages=2 * i, raw_chars=0, raw_tokens=t, tokens=t,
                           cache_read_tokens=r, cache_write_tokens=t - r)
                for i, (t, r) in enumerate([(1000, 0), (1500, 1000), (2000, 1500)])]

    p = load_prices().lookup("claude-sonnet-4-5")
    plain = records()
    price_calls(plain, p)
    assert [r.cache_read_tokens for r in plain] == [0, 1000, 1500]
    kept = records()
    priced = price_calls(kept, p, breaks={0: 300, 2: 200})
    assert [r.cache_read_tokens for r in kept] == [300, 1000, 200]
    assert [r.cache_write_tokens for r in kept] == [700, 500, 1800]
    assert priced.raw == pytest.approx(p.input_cost(300, 700) + p.input_cost(1000, 500) + p.input_cost(200, 1800))


def test_a_break_that_read_more_than_the_context_would_changes_neither_context():
    """(#55) A recorded break reads no more than it recorded, never more than the context's own
    read: the raw history was given the recorded read (18,014 tokens, all its 493) where the policy
    read its 143, so that `none` cost more than no compaction (spotter/tool_heavy)."""
    records = [TurnRecord(call=i, message_index=2 * i, raw_messages=2 * i, raw_chars=0, raw_tokens=t, tokens=t,
                          cache_read_tokens=r, cache_write_tokens=t - r)
               for i, (t, r) in enumerate([(15, 0), (143, 15), (493, 143), (1603, 493)])]
    p = load_prices().lookup("claude-sonnet-4-5")
    priced = price_calls(records, p, breaks={0: 17915, 2: 18014})
    assert [r.cache_read_tokens for r in records] == [15, 15, 143, 493]
    assert priced.raw == pytest.approx(sum(r.input_cost_usd for r in records))


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(st.integers(1, 50_000), st.integers(0, 60_000)), min_size=1, max_size=12),
       st.dictionaries(st.integers(0, 11), st.integers(0, 60_000), max_size=6),
       st.sampled_from(["anthropic", "openai"]), st.lists(st.integers(0, 2_000), min_size=12, max_size=12))
def test_a_policy_that_sends_the_raw_history_costs_what_no_compaction_costs(calls, breaks, provider, replies):
    """(#55) One rule for both contexts: whatever the recorded events, a run whose context is the
    raw history at every call (`none`) is priced as the raw baseline is, call by call."""
    from compactlab.engine.cost.cache_rules import RULES
    from compactlab.engine.cost.pricing import expected_reads

    rules = RULES[provider]
    tokens = list(accumulate(t for t, _ in calls))
    records = []
    for i, t in enumerate(tokens):  # the prefix model's own read: the previous prompt (and reply)
        natural = 0 if i == 0 else rules.read(min(tokens[i - 1] + (replies[i - 1] if rules.reply_cached else 0), t))
        records.append(TurnRecord(call=i, message_index=2 * i, raw_messages=2 * i, raw_chars=0, raw_tokens=t,
                                  tokens=t, cache_read_tokens=natural, cache_write_tokens=t - natural))
    usage = [{"input_tokens": t - min(r, t), "cache_read_input_tokens": min(r, t), "output_tokens": 10}
             for t, (_, r) in zip(tokens, calls)]
    expected = expected_reads(usage, rules) if rules.reply_cached else None
    breaks = {i: k for i, k in breaks.items() if i < len(records)}
    p = load_prices().lookup("claude-sonnet-4-5")
    priced = price_calls(records, p, breaks=breaks, rules=rules, reply_tokens=replies[:len(records)],
                         expected=expected)
    assert priced.raw == pytest.approx(sum(r.input_cost_usd for r in records), rel=1e-12, abs=1e-15)


def test_the_cache_ledger_compares_the_model_with_the_recording(tmp_path):
    from compactlab import load_policy, load_transcript, replay
    from helpers import write_jsonl

    def reply(i: int, read: int, write: int) -> dict:
        return {"type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": f"r{i} " + "x" * 400,
                "usage": {"input_tokens": 5, "cache_creation_input_tokens": write, "cache_read_input_tokens": read}}

    msgs = [user("go " * 200)]
    for i, (read, write) in enumerate([(0, 200), (205, 120), (325, 110), (435, 130), (565, 120)]):
        msgs += [reply(i, read, write), user(f"more {i} " + "y" * 400)]
    path = write_jsonl(tmp_path / "t.jsonl", msgs[:-1])
    none = replay(load_transcript(str(path)), load_policy("none")).summary
    ledger = none.cache_ledger
    assert ledger["calls"] == 5 and ledger["recorded_read_tokens"] == 205 + 325 + 435 + 565
    assert ledger["recorded_write_tokens"] == 200 + 120 + 110 + 130 + 120 + 25
    assert ledger["read_error"] == pytest.approx(ledger["modelled_read_tokens"] / ledger["recorded_read_tokens"] - 1, abs=1e-4)
    assert none.recorded_cache_breaks == [] and none.cache_warm_start_tokens == 0
    # a policy that changed the context sent something else: no ledger
    s08 = replay(load_transcript(str(path)), load_policy("s08", ["summary.trigger=300", "summary.unit=chars"])).summary
    assert s08.summaries and s08.cache_ledger is None


#: two models' prices, one with a long-context tier (priced wholly past 2,000 tokens here)
_TIERED = st.builds(lambda base, over: (base, over), st.sampled_from([0.3, 3.0, 15.0]), st.sampled_from([0.6, 6.0]))


@pytest.mark.skipif(core.native_module() is None, reason="the native core is not built in this install (it was "
                                                          "installed without a Rust toolchain): nothing to compare")
@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5_000) | st.just(2_000), st.integers(0, 6_000) | st.just(2_000),
                          st.integers(0, 6_000)), min_size=1, max_size=14),
       st.lists(st.sampled_from([None, "a", "b"]), min_size=14, max_size=14) | st.none(),
       st.lists(st.sampled_from([None, 0.0, 30.0, 400.0, 4_000.0]), min_size=14, max_size=14) | st.none(),
       st.sampled_from(["5m", "1h"]), st.dictionaries(st.integers(0, 13), st.integers(0, 6_000), max_size=5),
       st.dictionaries(st.integers(0, 13), st.integers(0, 6_000), max_size=5) | st.none(),
       st.sampled_from(["anthropic", "openai", "deepseek", "gemini", "none"]),
       st.lists(st.integers(0, 2_000), min_size=14, max_size=14) | st.none(), _TIERED, st.booleans())
def test_the_native_pricing_is_pythons_to_the_last_bit(calls, models, gaps, ttl, breaks, expected, provider, replies,
                                                      tiered, one_model):
    """The native core's ``price_calls`` (``_native.price_calls``) against ``price_calls_in_python``:
    generated calls, models, times (gaps over and under the cache's lifetime, unknown ones),
    recorded breaks and expectations, every provider's rules, replies, tiered prices: the same
    reads, writes and costs of every record and the same sums, exactly."""
    from compactlab.engine.cost.cache_rules import RULES
    from compactlab.engine.cost.pricing import price_calls_in_python, prices_looked_up

    base, over = tiered
    p = load_prices().lookup("claude-sonnet-4-5")
    tier = p._replace(input=over, cache_read=over / 10, cache_write_5m=over * 1.25, cache_write_1h=over * 2, tiers=())
    plain = p._replace(input=base, cache_read=base / 10, tiers=((2_000, tier),))
    other = p._replace(input=base * 2, cache_write_1h=base * 3)

    def prices(model, when):
        return plain if one_model or model != "b" else other

    def fresh(model, when):  # (an equal object of its own at each look-up: one entry of the table each)
        return prices(model, when)._replace()

    times = None if gaps is None else list(accumulate((g if g is not None else 0.0) for g in gaps))
    if gaps is not None:
        times = [None if g is None else t for g, t in zip(gaps, times)]

    def records(cls: type = TurnRecord) -> list:
        return [cls(call=i, message_index=2 * i, raw_messages=2 * i, raw_chars=0, raw_tokens=raw, tokens=t,
                    cache_read_tokens=min(r, t), cache_write_tokens=t - min(r, t))
                for i, (t, raw, r) in enumerate(calls)]

    n = len(calls)
    args = dict(models=models[:n] if models else models, times=times[:n] if times else times, ttl=ttl,
                breaks=breaks, rules=RULES[provider], reply_tokens=replies[:n] if replies else replies,
                expected=expected)
    assert core.in_use() is not None  # (``price_calls`` is the native core's)
    assert len(prices_looked_up(fresh, args["models"], args["times"], n)[0]) <= 2
    # (the native core's records priced in Rust directly, the Python engine's class by their attributes)
    for price, cls in product((prices, fresh, plain), (TurnRecord, PythonTurnRecord)):
        a, b = records(PythonTurnRecord), records(cls)
        want = price_calls_in_python(a, price, **args)
        got = price_calls(b, price, **args)
        assert [r.to_dict() for r in a] == [r.to_dict() for r in b]
        assert (want.raw, want.nocache, want.raw_nocache, want.expired, want.ttl) == (
            got.raw, got.nocache, got.raw_nocache, got.expired, got.ttl)


@pytest.mark.skipif(core.native_module() is None, reason="the native core is not built in this install (it was "
                                                          "installed without a Rust toolchain): nothing to compare")
@settings(max_examples=examples(300), deadline=None)
@given(st.integers(0, 30), st.lists(st.sampled_from([None, "a", "b", "c"]), min_size=30, max_size=30) | st.none(),
       st.lists(st.sampled_from([None, 0.0, 5.0, 5.0000001, 300.0]), min_size=30, max_size=30) | st.none(),
       st.lists(st.integers(0, 40), max_size=30), st.lists(st.integers(-1, 45), max_size=6))
def test_the_native_look_ups_and_restarts_are_pythons(n, models, times, at, positions):
    """``_native.prices_looked_up`` against ``prices_looked_up_in_python``: the same distinct prices,
    in the order met, and the same index of each call, while asking each distinct model and time
    once (models and times named or not; two keys with equal prices, told apart by value); and
    ``_native.restarted`` against ``restarted_calls`` (message indices that go back, positions
    repeated, out of order, before the first call)."""
    from compactlab.engine.cost.pricing import prices_looked_up, prices_looked_up_in_python, restarted_calls

    p = load_prices().lookup("claude-sonnet-4-5")
    asked: list = []

    def prices(model, when):  # (an equal object of its own at each look-up; "c" priced as "a")
        asked.append((model, when))
        return p._replace(input={"b": 9.0}.get(model, 3.0) + (when or 0) // 100)

    models, times = (models or [])[:n] or None, (times or [])[:n] or None
    want = prices_looked_up_in_python(prices, models, times, n)
    asked.clear()
    got = prices_looked_up(prices, models, times, n)
    assert got == want
    assert sorted(asked, key=repr) == sorted({(models[i] if models else None, times[i] if times else None)
                                              for i in range(n)}, key=repr)
    assert core.native_module().restarted(at, positions) == restarted_calls(at, positions)


_COUNT = st.integers(0, 6_000) | st.sampled_from([2_000, 1_024, 0])
#: a call's recorded usage as a loader gives it (a reply's counts, its model and time), and what
#: Python alone reads (a count that is not a plain whole number, a model that is not text)
_USAGE = st.one_of(
    st.just({}),
    st.fixed_dictionaries({"input_tokens": _COUNT, "output_tokens": _COUNT}, optional={
        "cache_creation_input_tokens": _COUNT, "cache_read_input_tokens": _COUNT,
        "cache_creation_1h_input_tokens": st.integers(0, 500), "model": st.sampled_from([None, "a", "b"]),
        "timestamp": st.sampled_from([None, "2026-01-01T00:00:00Z", "2026-01-01T00:04:00.000Z",
                                      "2026-01-01T02:00:00.500000+01:00", "2026-01-01T00:10:00"])}),
    st.sampled_from([{"input_tokens": 5.0}, {"input_tokens": True}, {"model": 7, "input_tokens": 3},
                     {"input_tokens": 10**20}, {"timestamp": 12, "input_tokens": 4}]),
)


@pytest.mark.skipif(core.native_module() is None, reason="the native core is not built in this install (it was "
                                                          "installed without a Rust toolchain): nothing to compare")
@settings(max_examples=examples(300), deadline=None)
@given(st.lists(_USAGE, max_size=14), st.sampled_from(["anthropic", "openai", "deepseek", "gemini", "none"]),
       st.sampled_from(["5m", "1h"]), st.sets(st.integers(0, 14), max_size=3), st.booleans(), _TIERED)
def test_the_recordings_own_cache_events_and_cost_are_pythons_on_the_native_core(calls_usage, provider, ttl,
                                                                               restarted, given_expected, tiered):
    """The recording's side of the pricing on the native core against its Python reference, on
    generated usage (absent, partial, every provider's rules, models and times that change, counts
    Python alone reads): each call's time (``_native.times_of``), the reads the rules expect
    (``expected_reads``), the recorded cache breaks (``recorded_breaks``) and what the usage implies
    it cost (``recorded_cost``, each call at its looked-up prices, tiered): the same values, in the
    same order, or Python's answer where the native core leaves the usage to it."""
    from types import SimpleNamespace

    from compactlab.engine.cost.cache_rules import RULES
    from compactlab.engine.cost.pricing import (_recorded_cost, _rates, _rules_arg, expected_reads_in_python,
                                                prices_looked_up, recorded_breaks_in_python, recorded_cost, seconds)

    native = core.native_module()
    rules = RULES[provider]
    times = [seconds(u.get("timestamp")) for u in calls_usage]
    assert native.times_of(calls_usage, seconds) == times
    plain = all(type(u.get(k, 0)) is int and -2**63 <= u.get(k, 0) < 2**63 for u in calls_usage
                for k in ("input_tokens", "output_tokens")) and all(type(u.get("model", "")) in (str, type(None))
                                                                   for u in calls_usage)
    want = expected_reads_in_python(calls_usage, rules) if plain else None
    got = native.expected_reads(calls_usage, _rules_arg(rules, ttl))
    assert got == want and list(got or ()) == list(want or ())
    expected = expected_reads_in_python(calls_usage, rules) if given_expected and plain else None
    if plain:
        want = recorded_breaks_in_python(calls_usage, times, ttl, restarted, rules, expected)
        got = native.recorded_breaks(calls_usage, times, restarted, _rules_arg(rules, ttl), expected)
        assert got == want and list(got) == list(want)  # (in the same order)
    else:
        assert native.recorded_breaks(calls_usage, times, restarted, _rules_arg(rules, ttl), expected) is None

    base, over = tiered
    p = load_prices().lookup("claude-sonnet-4-5")
    tier = p._replace(input=over, cache_read=over / 10, output=over * 5, tiers=())
    priced = {"a": p._replace(input=base, output=base * 4, tiers=((2_000, tier),)), "b": p._replace(input=base * 2)}

    def prices_of(model, when):  # (a time as text read as ``_Prices`` reads it; the prices change with it)
        at = seconds(when) if isinstance(when, str) else when
        return priced.get(model, p)._replace(cache_write_1h=2.0 + (at if isinstance(at, (int, float)) else 0) % 7)

    usage = {2 * i: u for i, u in enumerate(calls_usage) if u or i % 3}  # (a call without usage: absent or {})
    records = [SimpleNamespace(message_index=2 * i) for i in range(len(calls_usage))]
    calls = [usage.get(r.message_index) or {} for r in records]
    looked_up = prices_looked_up(prices_of, [u.get("model") for u in calls], [seconds(u.get("timestamp"))
                                                                             for u in calls], len(calls))
    direct = native.recorded_cost(calls, [_rates(q) for q in looked_up[0]], looked_up[1])
    want = recorded_cost(records, usage, prices_of)
    simple = plain and all(isinstance(u.get("timestamp", ""), str | None) for u in calls)
    assert (direct is None) == (not simple)
    got = _recorded_cost(records, usage, prices_of, calls, looked_up)
    if want is None:
        assert got is None
    else:
        assert (got.input, got.output) == (want.input, want.output)
        if direct is not None:
            assert direct == (want.input, want.output)


@pytest.mark.skipif(core.native_module() is None, reason="the native core is not built in this install (it was "
                                                          "installed without a Rust toolchain): nothing to compare")
@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6_000), st.integers(0, 6_000), st.floats(0, 1, allow_subnormal=False)
                          | st.just(-0.0), _USAGE), max_size=14),
       st.integers(0, 2) | st.floats(0, 5), st.booleans())
def test_the_cache_ledger_is_pythons_on_the_native_core(calls, recorded_input, extra_usage):
    """``cache_ledger`` on the native core's records (``_native.cache_ledger``'s sums) against
    ``cache_ledger_in_python``: generated reads, writes and costs (a negative zero among them),
    usage absent, partial and of kinds Python alone reads, more usage than records, none at all:
    the same ledger, its figures of the same types (an empty sum is Python's 0)."""
    from compactlab.engine.cost.pricing import cache_ledger, cache_ledger_in_python

    def records(cls: type) -> list:
        return [cls(call=i, message_index=2 * i, raw_messages=0, raw_chars=0, raw_tokens=0, tokens=r + w,
                    cache_read_tokens=r, cache_write_tokens=w, input_cost_usd=c)
                for i, (r, w, c, _) in enumerate(calls)]

    usage = [u for *_, u in calls] + ([{"input_tokens": 9}] if extra_usage else [])
    want = cache_ledger_in_python(records(PythonTurnRecord), usage, recorded_input)
    for cls in (TurnRecord, PythonTurnRecord):
        got = cache_ledger(records(cls), usage, recorded_input)
        assert repr(got) == repr(want)  # (the same values, each of the same type)


@pytest.mark.skipif(core.native_module() is None, reason="the native core is not built in this install (it was "
                                                          "installed without a Rust toolchain): nothing to compare")
@settings(max_examples=examples(500), deadline=None)
@given(st.datetimes(min_value=__import__("datetime").datetime(1960, 1, 1),
                    max_value=__import__("datetime").datetime(2260, 12, 31)),
       st.integers(-23 * 60 - 59, 23 * 60 + 59) | st.none(), st.sampled_from(["seconds", "milliseconds",
                                                                               "microseconds", "auto"]),
       st.booleans(), st.sampled_from(["", "x", " ", "T", "0"]))
def test_a_recorded_time_is_read_natively_as_python_reads_it(when, offset, timespec, zulu, tail):
    """``_native.times_of`` against ``seconds`` (``datetime.fromisoformat(...).timestamp()``) on
    generated times as recordings write them and otherwise: every offset, with or without one, ``Z``
    for UTC, seconds to microseconds, years the native reading leaves to Python, something after the
    time: the same value, to the last bit."""
    from datetime import timedelta, timezone

    from compactlab.engine.cost.pricing import seconds

    if offset is not None:
        when = when.replace(tzinfo=timezone(timedelta(minutes=offset)))
    text = when.isoformat(timespec=timespec)
    if zulu and offset == 0:
        text = text.replace("+00:00", "Z")
    texts = [text, text + tail, text[:-1]]
    usage = [{"timestamp": t} for t in texts] + [{}, {"timestamp": None}, {"timestamp": 5}]
    want = [seconds(u.get("timestamp")) for u in usage]
    asked: list[str] = []
    got = core.native_module().times_of(usage, lambda t: asked.append(t) or seconds(t))
    assert [repr(x) for x in got] == [repr(x) for x in want]
    # (read natively, not asked of Python: the form recordings write, in the years it reads)
    assert (text not in asked) == (offset is not None and 1970 <= when.year <= 2200)


def test_a_recordings_prices_and_recorded_cost_are_worked_out_once_per_table():
    """Every run of a recording (a compare's policies) is priced at the same calls' prices and the
    recording cost the same: kept for runs priced by the same table or model, worked out again for
    another (the same figures as worked out anew)."""
    from compactlab.engine.cost.pricing import _Prices, price_run, recorded_cost
    from compactlab.engine.feeds import as_feed
    from compactlab.transcripts import TranscriptBuilder
    from compactlab.transcripts.model import anthropic_usage

    b = TranscriptBuilder("t.jsonl", "anthropic")
    for i in range(6):
        b.add(user(f"prompt {i}"))
        b.add(asst(f"reply {i}"), usage=anthropic_usage({"input_tokens": 100 * (i + 1), "output_tokens": 10,
                                                         "cache_read_input_tokens": 50 * i},
                                                        "claude-sonnet-4-5", f"2026-11-20T10:0{i}:00Z"))
    feed = as_feed(b.build())

    def records() -> list:
        return [TurnRecord(call=i, message_index=2 * i + 1, raw_messages=2 * i + 1, raw_chars=0,
                           raw_tokens=100 * (i + 1), tokens=100 * (i + 1)) for i in range(6)]

    p = load_prices().lookup("claude-sonnet-4-5")
    dearer = p._replace(input=p.input * 2, cache_read=p.cache_read * 2)
    first = price_run(records(), feed, p, None, False, None, True)
    again = price_run(records(), feed, p, None, False, None, True)
    other = price_run(records(), feed, dearer, None, False, None, True)
    assert again.recorded is first.recorded  # (kept)
    assert other.recorded is not first.recorded and other.recorded.input > first.recorded.input
    anew = recorded_cost(records(), feed.usage, _Prices(dearer, feed.model, None))
    assert (other.recorded.input, other.recorded.output) == (anew.input, anew.output)
    assert other.priced.raw > first.priced.raw == again.priced.raw

"""The prompt-cache model and the pricing of a run, as units: no replay needed."""

from __future__ import annotations

from collections import Counter

import pytest

from compactlab.context import Context
from compactlab.cost import PromptCache, load_prices, price_calls
from compactlab.invariants import InvariantTracker, ViolationLog
from compactlab.messages import make_entry
from compactlab.records import TurnRecord
from compactlab.retention import retained
from compactlab.sizing import TokenEstimator, list_chars
from helpers import asst, context, results, tr, tu, user


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
    raw = price_calls(records, prices)
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

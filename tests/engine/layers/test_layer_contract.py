"""The contract tests of STYLE.md, over every registered layer (STYLE lesson 2)."""

from __future__ import annotations

import copy

import pytest

from compactlab.engine.layers import LAYERS, RunEnv
from compactlab.engine.policy import build_policy
from compactlab.summarizers import StubSummarizer
from helpers import asst, context, results, tool_session, tr, tu, user

POLICY = build_policy(dict(
    snip={"max_messages": 6, "keep_head": 2},
    summary={"trigger": 500},
    budget={"max_chars": 3000, "persist_threshold": 1000, "preview_chars": 100},
    micro={"keep_recent": 1, "min_chars": 50},
    custom={"call": "custom_steps:keep_ends", "settings": {"keep": 3}},
), "test policy")


def call(name, ctx):
    return LAYERS[name](ctx, POLICY.config_for(name), RunEnv(summarizer=StubSummarizer()))


CONTEXTS = {
    "empty": [],
    "one": [user("hello")],
    "tools": tool_session(6, size=800),
    "batch": [user("go"), asst(tu("a"), tu("b")), results(tr("a", "a" * 2500), tr("b", [{"type": "text", "text": "b" * 2500}]))],
}


def test_every_layer_is_covered():
    assert set(LAYERS) == {"budget", "snip", "micro", "summary", "reactive", "manual", "custom"}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_empty_context_passes_through(name):
    ctx = context([])
    out, stats = call(name, ctx)
    assert out is ctx and len(out) == 0 and stats.lowest_changed is None


@pytest.mark.parametrize("name", sorted(LAYERS))
@pytest.mark.parametrize("which", sorted(CONTEXTS))
def test_input_left_unchanged_and_output_repeatable(name, which):
    msgs = CONTEXTS[which]
    before = copy.deepcopy(msgs)
    ctx = context(msgs)
    out1, stats1 = call(name, ctx)
    assert ctx.messages == before and msgs == before
    out2, stats2 = call(name, context(copy.deepcopy(before)))
    assert out1.messages == out2.messages and stats1 == stats2
    assert out1.chars == len(__import__("orjson").dumps(out1.messages).decode())


@pytest.mark.parametrize("name", ["budget", "micro"])
@pytest.mark.parametrize("which", sorted(CONTEXTS))
def test_budget_and_micro_never_grow_the_context(name, which):
    ctx = context(CONTEXTS[which])
    out, _ = call(name, ctx)
    assert out.chars <= ctx.chars


def test_the_contract_contexts_make_every_layer_act():
    acted = {name: any(call(name, context(m))[0].messages != m for m in CONTEXTS.values()) for name in LAYERS}
    assert all(acted.values()), acted


@pytest.mark.parametrize("name", sorted(LAYERS))
@pytest.mark.parametrize("which", sorted(CONTEXTS))
def test_no_layer_writes_into_the_context_it_was_given(name, which):
    from compactlab.engine.context import Context
    from compactlab.engine.layers.micro import micro
    from compactlab.engine.policy import MicroConfig

    ctx = context(CONTEXTS[which])
    ctx, _ = micro(ctx, MicroConfig(keep_recent=1, min_chars=10_000), RunEnv(summarizer=StubSummarizer()))  # a memo
    state = lambda c: (list(c.entries), c.chars_sum, c.n_refs, list(c._keys), c.last_assistant, c.memo)  # noqa: E731
    before = state(ctx)
    out, _ = call(name, ctx)
    assert state(ctx) == before
    assert isinstance(out, Context)

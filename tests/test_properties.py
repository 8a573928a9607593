"""Property-based tests (SPEC §11) over generated valid transcripts and random layer values."""

from __future__ import annotations

import copy

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactlab import load_policy, replay
from compactlab.engine.context import Context
from compactlab.engine.measures.violations import check_context
from compactlab.engine.layers import LAYERS, RunEnv
from compactlab.transcripts.messages import make_entry
from compactlab.summarizers import StubSummarizer
from compactlab.transcripts import TranscriptBuilder
from strategies import policies, transcripts
from helpers import examples


SETTINGS = settings(max_examples=examples(60), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def transcript_of(msgs: list[dict]):
    b = TranscriptBuilder("generated.jsonl", "anthropic")
    for m in msgs:
        b.add(m)
    return b.build()


@SETTINGS
@given(transcripts(), policies(pair_safe=True))
def test_a_pair_safe_policy_introduces_no_violation(msgs, policy):
    t = transcript_of(msgs)
    assert check_context(t.entries) == []  # the generator makes valid recordings
    run = replay(t, policy)
    assert run.summary.violations_introduced == 0, run.summary.violations
    assert len(run.calls) == len(t.call_positions)


@SETTINGS
@given(transcripts(), policies(pair_safe=False))
def test_replay_is_deterministic_and_leaves_the_transcript_unchanged(msgs, policy):
    t = transcript_of(msgs)
    before = copy.deepcopy(t.messages)
    a = replay(t, policy).to_dict()
    b = replay(t, policy).to_dict()
    assert a == b
    assert t.messages == before and msgs == before


def contexts_of(msgs: list[dict], cut: int) -> Context:
    return Context(make_entry(m, i) for i, m in enumerate(msgs[: max(cut, 0)]))


@SETTINGS
@given(transcripts(max_turns=25), policies(pair_safe=False), st.integers(0, 200))
def test_budget_and_micro_never_make_the_context_larger(msgs, policy, cut):
    ctx = contexts_of(msgs, cut)
    for name in ("budget", "micro"):
        out, stats = LAYERS[name](ctx, getattr(policy, name), RunEnv(summarizer=StubSummarizer()))
        assert out.chars <= ctx.chars
        assert out.chars == len(orjson.dumps(out.messages).decode())  # the incremental size is exact


def _indexes_are_exact(ctx: Context) -> None:
    """What a context keeps up to date as it changes equals what it would compute from scratch."""
    fresh = Context(ctx.entries)
    for attr in ("chars_sum", "result_refs", "last_assistant", "origin_keys"):
        assert getattr(ctx, attr) == getattr(fresh, attr), attr
    for origin in range(-1, max((e.origin for e in ctx.entries), default=0) + 2):
        linear = next((j for j, e in enumerate(ctx.entries) if e.origin == origin >= 0), None)
        assert ctx.find_origin(origin) == linear
    assert ctx.n_refs == len(fresh.result_refs)
    for position in range(len(ctx) + 1):
        assert ctx.refs_before(position) == sum(1 for pos, _ in fresh.result_refs if pos < position)


def test_a_context_whose_shared_log_grew_copies_its_own_before_appending():
    msgs = [{"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "bash", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "x" * 200}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "b", "name": "bash", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "b", "content": "y" * 200}]}]
    entries = [make_entry(m, i) for i, m in enumerate(msgs)]
    first = Context(entries[:3])
    second = first.replaced({2: entries[2].with_result_content(0, "[cleared]")})
    second.extend(entries[3:5])  # extends the logs it shares with the first
    first.extend([make_entry({"role": "user", "content": "[made]"}, -1), entries[3], entries[4]])
    for c in (first, second):
        _indexes_are_exact(c)
    assert first.result_refs == [(2, 0), (5, 0)] and second.result_refs == [(2, 0), (4, 0)]


@SETTINGS
@given(transcripts(max_turns=12), st.lists(st.tuples(st.sampled_from(["append", "replace", "splice"]),
                                                     st.integers(0, 10_000), st.integers(0, 10_000)), max_size=40))
def test_contexts_sharing_their_logs_stay_exact(msgs, ops):
    """Contexts made from one another share their position logs; appending to any of them, in
    any order, leaves every one of them exact."""
    entries = [make_entry(m, i) for i, m in enumerate(msgs)]
    pool = [Context(entries[:2])]
    made = -1
    for op, a, b in ops:
        ctx = pool[a % len(pool)]
        if op == "append":  # the transcript's next message, or one a policy made
            nxt = max((e.origin for e in ctx.entries if e.origin >= 0), default=-1) + 1
            if nxt < len(entries) and b % 3:
                ctx.append(entries[nxt])
            else:
                ctx.append(make_entry({"role": "user", "content": "[made]"}, made))
                made -= 1
        elif op == "replace":
            with_results = [pos for pos, e in enumerate(ctx.entries) if e.results]
            if with_results:
                pos = with_results[b % len(with_results)]
                pool.append(ctx.replaced({pos: ctx.entries[pos].with_result_content(0, "[cleared]")}))
        else:
            head = a % (len(ctx) + 1)
            tail = head + b % (len(ctx) - head + 1)
            pool.append(ctx.spliced(head, [make_entry({"role": "user", "content": "[cut]"}, made)], tail))
            made -= 1
        for c in pool:
            _indexes_are_exact(c)


@SETTINGS
@given(transcripts(max_turns=25), policies(pair_safe=False), st.integers(0, 200))
def test_every_layer_keeps_the_contract(msgs, policy, cut):
    ctx = contexts_of(msgs, cut)
    before = copy.deepcopy(ctx.messages)
    checked = 0
    for name, layer in LAYERS.items():
        config = policy.config_for(name)
        def env() -> RunEnv:
            return RunEnv(summarizer=StubSummarizer())

        out1, stats1 = layer(ctx, config, env())
        out2, stats2 = layer(contexts_of(msgs, cut), config, env())
        assert ctx.messages == before  # input left unchanged
        assert out1.messages == out2.messages and stats1 == stats2  # repeatable
        assert out1.chars == len(orjson.dumps(out1.messages).decode())
        _indexes_are_exact(out1)
        if stats1.lowest_changed is not None:  # the prefix before it is untouched
            assert out1.messages[: stats1.lowest_changed] == before[: stats1.lowest_changed]
        else:
            assert out1.messages == before
        empty, _ = layer(Context(), config, env())
        assert len(empty) == 0
        checked += 1
    assert checked == len(LAYERS) == 7


@SETTINGS
@given(transcripts())
def test_the_none_policy_is_the_raw_baseline(msgs):
    t = transcript_of(msgs)
    run = replay(t, load_policy("none"))
    assert all((c.chars, c.tokens) == (c.raw_chars, c.raw_tokens) for c in run.calls)
    assert run.summary.cost_usd == run.summary.raw_cost_usd


def _using_probes(msgs: list[dict]) -> list[dict]:
    """``msgs`` with each tool result naming a symbol that a later reply uses: hindsight probes."""
    out = copy.deepcopy(msgs)
    for i, m in enumerate(out):
        if m["role"] == "user" and isinstance(m["content"], list):
            for b in m["content"]:
                if b.get("type") == "tool_result":
                    b["content"] = f"found handler_{i:03d}_impl in src/mod_{i}.py\n" + str(b.get("content"))
        elif m["role"] == "assistant" and i > 3:
            text = f"next: handler_{i - 3:03d}_impl and src/mod_{i - 3}.py"
            m["content"] = [*m["content"], {"type": "text", "text": text}] if isinstance(m["content"], list) else text
    return out


@SETTINGS
@given(transcripts(max_turns=25), policies(pair_safe=False), st.booleans())
def test_the_recordings_own_context_is_checked_as_the_reference_check_does(msgs, policy, none):
    """(#44 §2) Every replay measures recall by ``measures.RECALL``, which does not read the
    recording's own context (while no layer has acted, every probe is kept: ``check_intact``);
    ``measures.Recall``, which checks every context, is the reference: the runs are the same."""
    import pytest

    from compactlab.engine import measures
    from compactlab.engine.measures import recall
    from helpers import assert_same_run

    msgs = _using_probes(msgs)
    if none:
        policy = load_policy("none")
    used = []
    fast_path = recall.check_intact
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(recall, "check_intact", lambda *a: used.append(1) or fast_path(*a))
        fast = replay(transcript_of(msgs), policy)
    reference = replay(transcript_of(msgs), policy, recall=measures.Recall)
    assert measures.RECALL is not measures.Recall
    assert_same_run(fast, reference)
    if none and fast.summary.probes:
        assert used  # (the fast path ran)

from __future__ import annotations

import pytest

from compactlab.engine.layers import RunEnv, snip
from compactlab.engine.policy import SnipConfig
from compactlab.summarizers import StubSummarizer
from helpers import asst, context, results, tr, tu, user


def env() -> RunEnv:
    return RunEnv(summarizer=StubSummarizer())


def sixty_messages() -> list[dict]:
    """Seed 000's worked example: 60 messages, msg2 a tool_use and msg3 its result."""
    msgs = [user("m0"), asst("m1"), asst("m2", tu("a", "bash")), results(tr("a"))]
    while len(msgs) < 60:
        msgs.append(user(f"m{len(msgs)}") if len(msgs) % 2 == 0 else asst(f"m{len(msgs)}"))
    return msgs


def test_seed000_worked_example_head_grows_to_4_and_9_are_snipped():
    msgs = sixty_messages()
    out, stats = snip(context(msgs), SnipConfig(), env())
    assert stats.snipped == 9
    assert stats.lowest_changed == 4
    got = out.messages
    assert got[:4] == msgs[:4]
    assert got[4] == {"role": "user", "content": "[snipped 9 messages]"}
    assert got[5:] == msgs[13:]
    assert len(got) == 4 + 1 + 47


def test_naive_cut_of_seed001_splits_the_pair():
    msgs = sixty_messages()
    cfg = SnipConfig(pair_safe=False, placeholder="[snipped {n} messages from conversation middle]")
    out, stats = snip(context(msgs), cfg, env())
    assert stats.snipped == 10  # len - keep_head - keep_tail
    assert out.messages[:3] == msgs[:3]
    assert out.messages[3]["content"] == "[snipped 10 messages from conversation middle]"
    assert out.messages[4:] == msgs[13:]  # msg2's tool_use lost its result: an orphan


def test_tail_starting_with_results_takes_its_tool_use():
    msgs = [user("u0"), asst("a1"), user("u2"), asst("a3"), asst("a4", tu("b", "bash")), results(tr("b")),
            asst("a6"), user("u7"), asst("a8"), user("u9"), asst("a10")]
    # max 7, head 1 -> keep_tail 6 -> tail_start = 11 - 6 = 5, which is b's result
    out, stats = snip(context(msgs), SnipConfig(max_messages=7, keep_head=1), env())
    assert stats.snipped == 3
    assert out.messages == [msgs[0], {"role": "user", "content": "[snipped 3 messages]"}, *msgs[4:]]


@pytest.mark.parametrize("n", [0, 1, 49, 50])
def test_at_or_under_max_nothing_changes(n):
    msgs = [user("x") if i % 2 == 0 else asst("y") for i in range(n)]
    ctx = context(msgs)
    out, stats = snip(ctx, SnipConfig(), env())
    assert out is ctx and stats.snipped == 0 and stats.lowest_changed is None


def test_51_messages_snips_one():
    msgs = [user("x") if i % 2 == 0 else asst("y") for i in range(51)]
    out, stats = snip(context(msgs), SnipConfig(), env())
    assert stats.snipped == 1 and len(out) == 51  # one message out, one placeholder in


def test_head_only_protection_of_seed004_leaves_the_tail_cut_alone():
    msgs = [user("m0"), asst("m1")]
    for i in range(2, 60, 2):
        msgs.append(asst(f"m{i}", tu(f"t{i}", "bash")))
        msgs.append(results(tr(f"t{i}")))
    msgs = msgs[:60]
    # tail_start = 60 - 47 = 13: message 13 is a tool_result whose tool_use (12) is cut off
    assert msgs[13]["role"] == "user" and msgs[12]["role"] == "assistant"
    out_safe, s1 = snip(context(msgs), SnipConfig(pair_safe=True), env())
    out_head, s2 = snip(context(msgs), SnipConfig(pair_safe="head"), env())
    assert s1.snipped == s2.snipped - 1
    assert out_head.messages[4]["content"] == "[snipped 9 messages]"
    assert out_head.messages[5] == msgs[13]  # a result whose tool_use was snipped


def test_a_placeholder_identical_to_the_one_there_is_no_cache_break():
    """#17 part 7: re-snipping with the same placeholder text changes the context only after it."""
    from compactlab.transcripts.messages import make_entry
    from helpers import tool_session

    msgs = tool_session(12)
    for text, lowest in (("[earlier messages snipped]", 3), ("[snipped {n} messages]", 2)):
        env = RunEnv(summarizer=StubSummarizer())
        cfg = SnipConfig(max_messages=8, keep_head=2, pair_safe=False, placeholder=text)
        ctx, first = snip(context(msgs[:15]), cfg, env)
        assert first.lowest_changed == 2
        for i, m in enumerate(msgs[15:17], 15):
            ctx.append(make_entry(m, i))
        again, stats = snip(ctx, cfg, env)
        assert stats.lowest_changed == lowest, text
        assert (again.entries[2] is ctx.entries[2]) == (lowest == 3)
        assert again.messages[:lowest] == ctx.messages[:lowest]

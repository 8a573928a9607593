from __future__ import annotations

import pytest

from compactlab.engine.context import Context
from compactlab.engine.layers import RunEnv, micro
from compactlab.engine.policy import MicroConfig
from compactlab.summarizers import StubSummarizer
from helpers import asst, context, results, tool_session, tr, tu, user

PLACEHOLDER = "[Earlier tool result compacted. Re-run if needed.]"


def env(names: dict | None = None) -> RunEnv:
    return RunEnv(summarizer=StubSummarizer(), tool_names=names or {})


def result_contents(ctx) -> list:
    return [b["content"] for m in ctx.messages if isinstance(m["content"], list)
            for b in m["content"] if b.get("type") == "tool_result"]


def test_keeps_the_last_three_results():
    msgs = tool_session(5, size=500)
    out, stats = micro(context(msgs), MicroConfig(), env())
    contents = result_contents(out)
    assert contents[:2] == [PLACEHOLDER, PLACEHOLDER]
    assert contents[2:] == ["x" * 500] * 3
    assert stats.micro_compacted == 2
    assert stats.lowest_changed == 2  # the first result message


@pytest.mark.parametrize("size,replaced", [(119, False), (120, False), (121, True)])
def test_min_chars_edge(size, replaced):
    msgs = tool_session(4, size=size)
    out, stats = micro(context(msgs), MicroConfig(), env())
    assert stats.micro_compacted == (1 if replaced else 0)


def test_tool_name_placeholder_preserve_and_string_only():
    msgs = [user("go"),
            asst(tu("r1", "read_file", path="a.py")), results(tr("r1", "a" * 300)),
            asst(tu("b1", "bash", command="ls")), results(tr("b1", "b" * 300)),
            asst(tu("b2", "bash", command="ls")), results(tr("b2", [{"type": "text", "text": "c" * 300}])),
            asst(tu("b3", "bash")), results(tr("b3", "d" * 300)),
            asst(tu("b4", "bash")), results(tr("b4", "e" * 300)),
            asst(tu("b5", "bash")), results(tr("b5", "f" * 300))]
    names = {"r1": "read_file", "b1": "bash", "b2": "bash", "b3": "bash", "b4": "bash", "b5": "bash"}
    cfg = MicroConfig(min_chars=100, placeholder="[Previous: used {tool_name}]", preserve_tools=["read_file"],
                      string_content_only=True)
    out, stats = micro(context(msgs), cfg, env(names))
    contents = result_contents(out)
    assert contents[0] == "a" * 300  # read_file preserved
    assert contents[1] == "[Previous: used bash]"
    assert contents[2] == [{"type": "text", "text": "c" * 300}]  # list-form skipped (seed 003)
    assert stats.micro_compacted == 1


def test_only_consumed_counts_results_before_the_last_assistant():
    # seed 003's worked example: 4 results, the last after the last assistant -> 3 consumed -> nothing
    msgs = [user("go")]
    for i, n in enumerate(["read_file", "bash", "read_file", "edit_file"]):
        msgs += [asst(tu(f"t{i}", n)), results(tr(f"t{i}", "z" * 400))]
    names = {f"t{i}": n for i, n in enumerate(["read_file", "bash", "read_file", "edit_file"])}
    cfg = MicroConfig(only_consumed=True, min_chars=100)
    out, stats = micro(context(msgs), cfg, env(names))
    assert stats.micro_compacted == 0
    msgs += [asst(tu("t4", "bash")), results(tr("t4", "z" * 400))]
    names["t4"] = "bash"
    out, stats = micro(context(msgs), cfg, env(names))
    assert stats.micro_compacted == 1  # t0 is now old and consumed


def test_never_replaces_with_something_longer():
    msgs = tool_session(5, size=130)
    cfg = MicroConfig(placeholder="p" * 200)
    out, stats = micro(context(msgs), cfg, env())
    assert stats.micro_compacted == 0


def test_incremental_memo_agrees_with_a_fresh_scan():
    msgs = tool_session(12, size=400)
    cfg = MicroConfig()
    ctx = context(msgs[:5])
    e = env()
    for m in msgs[5:]:
        from compactlab.transcripts.messages import make_entry

        ctx.append(make_entry(m, len(ctx)))
        ctx, _ = micro(ctx, cfg, e)
    fresh, _ = micro(context(msgs), cfg, env())
    assert ctx.messages == fresh.messages


@pytest.mark.parametrize("keep_by", ["results", "turns"])
def test_what_micro_dealt_with_survives_snips_and_agrees_with_a_fresh_scan(keep_by):
    """Snip (a splice) carries micro's count of results dealt with, less those it dropped: at
    every call, micro on the carried count gives what micro scanning from the first result gives."""
    from compactlab.engine.layers import snip
    from compactlab.transcripts.messages import make_entry
    from compactlab.engine.policy import SnipConfig

    msgs = tool_session(40, size=400)
    for i in range(3, len(msgs), 7):  # some results short enough to keep, some with two blocks
        if msgs[i]["role"] == "user":
            msgs[i] = results(tr(f"s{i}", "short"), *msgs[i]["content"])
    cfg, snip_cfg = MicroConfig(keep_recent=2, keep_by=keep_by), SnipConfig(max_messages=12, keep_head=3)
    ctx, e = context(msgs[:3]), env()
    carried = 0
    for i, m in enumerate(msgs[3:], 3):
        ctx.append(make_entry(m, i))
        ctx, _ = snip(ctx, snip_cfg, e)
        carried += bool(ctx.memo)
        fresh = Context(ctx.entries)  # the same messages, nothing dealt with
        ctx, _ = micro(ctx, cfg, e)
        fresh, _ = micro(fresh, cfg, env())
        assert ctx.messages == fresh.messages, i
    assert carried > 20  # the count did survive the snips

"""LangChain's own compactors as steps (#45 §3): SummarizationMiddleware and ContextEditingMiddleware
with ClearToolUsesEdit, run on the recorded messages converted to LangChain's and back."""

from __future__ import annotations

import json

import pytest

from compactlab import load_policy, load_transcript, replay
from compactlab.frameworks import langchain as lc
from compactlab.frameworks.against import with_settings
from helpers import SAMPLES, asst, results, tool_session, tr, tu, user

MEDIUM = SAMPLES / "synth-medium.jsonl"


def test_messages_go_to_langchains_types_and_come_back_as_the_very_ones_given():
    msgs = [user("go"), asst("look", tu("a", "bash", command="ls"), tu("b", "read", path="x")),
            results(tr("a", "one"), tr("b", [{"type": "text", "text": "two"}], is_error=True),
                    {"type": "text", "text": "and then?"}),
            asst("done")]
    parts = lc._Parts(msgs)
    kinds = [type(m).__name__ for m in parts.lc]
    assert kinds == ["HumanMessage", "AIMessage", "ToolMessage", "ToolMessage", "HumanMessage", "AIMessage"]
    assert parts.lc[1].tool_calls[1] == {"id": "b", "name": "read", "args": {"path": "x"}, "type": "tool_call"}
    assert parts.lc[3].status == "error" and parts.lc[3].name == "read"
    back = parts.back(parts.lc)
    assert all(b is m for b, m in zip(back, msgs)) and len(back) == len(msgs)
    # a part the framework changed: the message is rebuilt, each other block as it was
    changed = [*parts.lc[:2], parts.lc[2].model_copy(update={"content": "[cleared]"}), *parts.lc[3:]]
    again = parts.back(changed)
    assert again[2] is not msgs[2] and again[2]["content"][0] == {**tr("a", "[cleared]")}
    assert again[2]["content"][1:] == msgs[2]["content"][1:] and again[3] is msgs[3]
    # what a summarizer is given: the tool messages folded into the user message they answer
    assert lc.from_langchain(parts.lc)[2]["content"][:2] == [tr("a", "one"), tr("b", [{"type": "text", "text": "two"}],
                                                                               is_error=True)]


def test_clear_tool_uses_edits_the_request_only_so_it_counts_the_whole_history_at_every_call(facts):
    """The agent keeps every result: what the edit cleared at a call is put back before it runs again,
    so a history over the trigger is edited at every later call (the context it sent is not)."""
    msgs = tool_session(8, size=400)
    settings = lc.ClearToolUsesSettings(trigger=500, keep=3)
    first = lc.clear_tool_uses(msgs, f := facts(1), settings)
    cleared = [m for m in first if m["role"] == "user" and isinstance(m["content"], list)
               and m["content"][0]["content"] == "[cleared]"]
    assert len(cleared) == 5 and first[0] is msgs[0] and first[-1] is msgs[-1]
    assert all(first[i] is msgs[i] for i in range(len(msgs)) if msgs[i]["role"] == "assistant")
    assert set(f.state["cleared"]) == {f"t{i}" for i in range(5)}  # (what it holds, to put back)
    # the next call: what was sent, plus one more tool use; the context as sent is small...
    more = [*first, asst("again", tu("t8", "bash", command="cmd 8")), results(tr("t8", "y" * 400))]
    assert facts(2).count(more) < 2000
    second = lc.clear_tool_uses(more, f2 := facts(2), settings)
    assert f2.state is f.state and set(f.state["cleared"]) == {f"t{i}" for i in range(6)}
    # ...but the history is over the trigger: the result that became old is cleared too, and what
    # was cleared before is sent as it was (the very messages given: the cache keeps them)
    assert second[:len(first) - 6] == first[:len(first) - 6]
    assert all(a is b for a, b in zip(second, more) if a == b)
    assert second[12]["content"][0]["content"] == "[cleared]" and second[12] is not more[12]
    assert json.dumps(second[-1]) == json.dumps(more[-1])


def test_summarization_triggers_on_the_usage_the_last_reply_reported(facts):
    """A LangChain agent's last AIMessage carries the provider's usage, on which the middleware
    triggers: without it, its approximate count (4 characters a token) would see a tenth of this."""
    msgs = [user("go"), *tool_session(12, size=50)[1:], asst("so far so good"), user("and now?")]

    class Big:
        def __getattr__(self, name):
            return getattr(f, name)

        def count(self, messages):
            return 100_000 if len(messages) > 2 else 10

    f = facts(1)
    settings = lc.SummarizationSettings(trigger_fraction=0, trigger_tokens=50_000, keep_messages=4,
                                        trim_tokens_to_summarize=0)
    assert lc.summarization(msgs, f, settings) is msgs  # (its own count: under 50,000)
    out = lc.summarization(msgs, Big(), settings)
    assert out[0]["content"].startswith("Here is a summary of the conversation to date:\n\nSummary of ")
    assert out[1:] == msgs[-4:] and all(a is b for a, b in zip(out[1:], msgs[-4:]))
    assert f._run.stats.summaries == 1  # (asked of compactlab's summarizer, and counted)


def test_the_presets_replay_measured_like_any_policy():
    t = load_transcript(str(MEDIUM))
    summ = with_settings(load_policy("langchain-summarization"), trigger_fraction=0, trigger_tokens=30_000,
                         trim_tokens_to_summarize=0)
    s = replay(t, summ).summary
    assert s["custom"] > 0 and s["summaries"] == s["custom"] and s["summary_input_tokens"] > 0
    assert s["violations_introduced"] == 0 and s["reduction"] > 0.3
    clear = replay(t, with_settings(load_policy("langchain-clear-tool-uses"), trigger=30_000)).summary
    assert clear["custom"] > 0 and clear["summaries"] == 0 and clear["violations_introduced"] == 0
    assert clear["reduction"] > 0.3 and clear["recall"] < 1.0
    # counted by the run's estimate, it first acts at the first call whose whole history is over the
    # trigger by that estimate (what the calls of no compaction measure)
    ours = replay(t, with_settings(load_policy("langchain-clear-tool-uses"), trigger=30_000, tokens="compactlab"))
    over = next(c.call for c in replay(t, load_policy("none")).calls if c.tokens > 30_000)
    assert ours.events[0].call == over and clear["custom"] >= ours.summary["custom"] > 0


def test_a_framework_step_is_its_code_and_the_frameworks_version():
    from compactlab.engine.layers.custom import load_step

    a = load_policy("langchain-clear-tool-uses")
    assert load_step(a.custom.call).digest and a.fingerprint != load_policy("langchain-summarization").fingerprint
    assert lc.clear_tool_uses.identity == f"langchain {lc.VERSION}"


def test_a_missing_extra_is_one_error_naming_it(cli, tmp_path, monkeypatch):
    import sys

    from compactlab.engine.layers.custom import load_step

    for name in [m for m in sys.modules if m == "langchain" or m.startswith(("langchain.", "compactlab.frameworks.lang"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "langchain", None)  # (what an import of a package not installed does)
    load_step.cache_clear()
    try:
        r = cli("replay", MEDIUM, "-p", "langchain-summarization", "--dry-run")
        assert r.exit_code == 2
        assert "the langchain steps need the langchain extra" in r.stderr
        assert "pip install 'compactlab[langchain]'" in r.stderr and "Traceback" not in r.stderr
        listed = cli("policies", "list")
        assert listed.exit_code == 0 and "strands-summarizing" in listed.stdout
        # (one line for the extra, naming both its presets; not one a preset)
        left = [line for line in listed.stderr.splitlines() if line.startswith("left out")]
        assert left == ["left out langchain-clear-tool-uses, langchain-summarization: the langchain steps need the "
                        "langchain extra (no module langchain) (pip install 'compactlab[langchain]')"], left
    finally:
        load_step.cache_clear()


@pytest.mark.slow  # (every shared recording: CI runs it with pytest -m slow)
@pytest.mark.parametrize("preset", ["langchain-summarization", "langchain-clear-tool-uses"])
def test_the_presets_replay_every_shared_session_offline(shared_sessions, preset):
    policy = load_policy(preset)
    for name, t in shared_sessions.items():
        s = replay(t, policy).summary
        assert s["calls"] > 0 and s["violations_introduced"] == 0, name

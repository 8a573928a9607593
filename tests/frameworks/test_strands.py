"""Strands Agents' conversation managers as steps (#45 §3): SlidingWindowConversationManager and
SummarizingConversationManager, driven as an agent drives them, on the recorded messages converted
to Strands' and back."""

from __future__ import annotations

import pytest

from compactlab import load_policy, load_transcript, replay
from compactlab.frameworks import strands as st
from compactlab.frameworks.against import with_settings
from helpers import SAMPLES, asst, results, tool_session, tr, tu, user

MEDIUM = SAMPLES / "synth-medium.jsonl"


def _pairs_whole(messages: list[dict]) -> bool:
    """Every tool result answers a tool use of the message before it."""
    for i, m in enumerate(messages):
        if m["role"] == "user" and isinstance(m["content"], list):
            ids = {b["tool_use_id"] for b in m["content"] if b.get("type") == "tool_result"}
            before = messages[i - 1]["content"] if i else []
            if ids and not ids <= {b.get("id") for b in before if isinstance(b, dict)}:
                return False
    return True


def test_messages_go_to_strands_shape_and_back():
    msgs = [user("go"), asst("look", tu("a", "bash", command="ls"), {"type": "thinking", "thinking": "hm",
                                                                      "signature": "s"}),
            results(tr("a", "one", is_error=True), {"type": "image", "source": {"type": "base64", "data": "QQ=="}})]
    shaped = [st.to_strands(m) for m in msgs]
    assert shaped[1]["content"][1] == {"toolUse": {"toolUseId": "a", "name": "bash", "input": {"command": "ls"}}}
    assert shaped[2]["content"][0] == {"toolResult": {"toolUseId": "a", "content": [{"text": "one"}],
                                                      "status": "error"}}
    assert shaped[2]["content"][1]["text"].startswith('{"type":"image"')  # (weighs what it weighs)
    assert st._back(shaped, shaped, msgs) == msgs and all(a is b for a, b in zip(st._back(shaped, shaped, msgs), msgs))
    assert st.from_strands(shaped[1])["content"][2] == {"type": "thinking", "thinking": "hm", "signature": "s"}


def test_the_sliding_window_trims_when_an_invocation_ends(facts):
    msgs = [*tool_session(10, size=100), asst("done"), user("next task")]
    out = st.sliding_window(msgs, facts(11, after_prompt=True), st.SlidingWindowSettings(window_size=8))
    # the invocation's messages cut to 8 where no tool use loses its result, then the new prompt;
    # with no plain user message to cut at, Strands cuts before a tool use (its fallback): the
    # context then starts with the assistant, which the violations measure reports
    assert len(out) <= 9 and out[-1] is msgs[-1] and _pairs_whole(out) and out[0]["role"] == "assistant"
    assert all(any(o is m for m in msgs) for o in out)  # (kept, never copied)
    # in the middle of an invocation it waits for its end (per_turn off)
    mid = msgs[:15]
    assert st.sliding_window(mid, facts(7), st.SlidingWindowSettings(window_size=8)) == mid


def test_over_the_window_it_truncates_the_oldest_results_then_trims(facts):
    msgs = tool_session(6, size=5_000)
    window = facts().count(msgs) - 500
    f = facts(6, window=window)
    out = st.sliding_window(msgs, f, st.SlidingWindowSettings(window_size=40))
    assert f.count(out) <= window and len(out) == len(msgs)
    first = out[2]["content"][0]["content"]  # (the oldest result: its first and last 200 characters kept)
    assert isinstance(first, list) and 400 < len(first[0]["text"]) < 600 and out[2] is not msgs[2]
    assert all(o is m for o, m in zip(out[3:], msgs[3:]))
    # far over: it trims too
    small = st.sliding_window(msgs, facts(6, window=2_000), st.SlidingWindowSettings(window_size=40))
    assert len(small) < len(msgs) and facts().count(small) <= 2_000 and _pairs_whole(small)


def test_summarizing_replaces_the_oldest_messages_by_a_summary_on_overflow(facts):
    msgs = tool_session(15, size=1_000)
    f = facts(15, window=3_000)
    out = st.summarizing(msgs, f, st.SummarizingSettings())
    assert f.count(out) <= 3_000 and f._run.stats.summaries >= 1
    assert out[0]["role"] == "user" and out[0]["content"][0]["text"].startswith("Summary of ")
    assert all(any(o is m for m in msgs) for o in out[1:])
    # under the window it does nothing (no proactive compression asked)
    assert st.summarizing(msgs, facts(15), st.SummarizingSettings()) == msgs


def test_a_summary_that_fails_is_a_call_at_which_the_step_did_nothing():
    from compactlab.errors import SummarizerError

    class Down:
        name = "down"

        def summarize(self, request):
            raise SummarizerError("overloaded")

    t = load_transcript(str(MEDIUM))
    policy = with_settings(load_policy("strands-summarizing"))
    small = replay(t, policy, summarizer=Down(), window=40_000)
    assert small.summary["summaries"] == 0 and small.summary["custom"] == 0
    assert small.failed_summaries and small.failed_summaries[0]["error"] == "overloaded"


def test_the_presets_replay_measured_like_any_policy():
    t = load_transcript(str(MEDIUM))
    s = replay(t, load_policy("strands-summarizing"), window=40_000).summary
    # (it summarises again while the prompt is over: an agent retries as often)
    assert s["custom"] > 0 and s["summaries"] >= s["custom"] and s["overflows"] < s["calls"] / 10
    w = replay(t, with_settings(load_policy("strands-sliding-window"), window_size=12)).summary
    assert w["custom"] > 0 and w["reduction"] > 0.3 and w["summaries"] == 0


@pytest.mark.slow  # (every shared recording: CI runs it with pytest -m slow)
def test_the_presets_replay_every_shared_session_offline(shared_sessions):
    for preset in ("strands-sliding-window", "strands-summarizing"):
        policy = load_policy(preset)
        for name, t in shared_sessions.items():
            assert replay(t, policy).summary["calls"] > 0, (preset, name)

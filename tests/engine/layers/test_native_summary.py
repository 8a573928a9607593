"""The summary layer's stub summary made by the native loop (``LayerTurns``' ``Stub``) against the
Python layer and stub summarizer, its reference: generated conversations whose texts hold every
kind of whitespace Python splits on, long prompts and sized placeholders,
through the options the native loop makes (kept heads and tails, an acknowledgement, a template
naming the saved transcript, the stub's limit), give the same run on both cores; the options it
does not make, and a text holding a sized placeholder, are left to Python."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactlab import ReplayOptions
from compactlab import core
from compactlab.engine import keeping
from compactlab.engine.policy import build_policy
from compactlab.summarizers.stub import StubSummarizer
from compactlab.transcripts.messages import SIZED_MARK
from helpers import assert_same_run, built, on_both_cores, examples

NATIVE = core.native_module()
pytestmark = pytest.mark.skipif(NATIVE is None, reason="the native core is not built in this install: nothing "
                                                       "to compare")

#: what a prompt is made of: words, every whitespace Python's str.split() cuts on (U+001C..U+001F
#: among them, which Rust's is_whitespace does not count), letters beyond ASCII, a sized placeholder
PIECES = st.sampled_from(["fix", "the", "bug", "é", "漢字", " ", "\t", "\n", "\x1c", "\x1f", "\x85", "\xa0",
                          "\u2028", "\u3000", "\u200b", "…", "{summary}", "x" * 90])


@st.composite
def conversations(draw) -> list[dict]:
    n = 0
    msgs: list[dict] = []
    for _ in range(draw(st.integers(2, 14))):
        prompt = "".join(draw(st.lists(PIECES, max_size=60)))
        if draw(st.integers(0, 9)) == 0:
            prompt += f"{SIZED_MARK}[tool_result len=40]"
        msgs.append({"role": "user", "content": prompt or "go"})
        uses, results = [], []
        for _ in range(draw(st.integers(0, 3))):
            n += 1
            name = draw(st.sampled_from(["read", "bash", "edit", "édit"]))
            path = draw(st.sampled_from(["a.py", "b.py", "dir/c.py", "é.md"]))
            uses.append({"type": "tool_use", "id": f"toolu_{n:04d}", "name": name, "input": {"path": path}})
            results.append({"type": "tool_result", "tool_use_id": f"toolu_{n:04d}",
                            "content": "out " * draw(st.integers(1, 400)), "is_error": draw(st.booleans())})
        said = [{"type": "text", "text": "".join(draw(st.lists(PIECES, max_size=30))) or "ok"}] if draw(st.booleans()) else []
        msgs.append({"role": "assistant", "content": said + uses or [{"type": "text", "text": "done"}]})
        if results:
            msgs.append({"role": "user", "content": results})
    msgs.append({"role": "assistant", "content": [{"type": "text", "text": "end"}]})
    return msgs


def _policy(draw_summary: dict) -> object:
    return build_policy({"order": ["budget", "snip", "micro"], "snip": {"enabled": False},
                         "budget": {"enabled": False}, "micro": {"keep_recent": 2, "min_chars": 50},
                         "summary": {"trigger": 600, **draw_summary}}, "generated policy")


SUMMARY = st.fixed_dictionaries({
    "keep_head": st.integers(0, 4), "keep_tail": st.integers(0, 5),
    "ack": st.sampled_from(["", "Understood."]),
    "template": st.sampled_from(["[Compacted]\n\n{summary}", "{summary} (saved: {transcript})", "{transcript}: {summary}{summary}"]),
    "input_chars": st.sampled_from([10, 80_000])})


def _both(monkeypatch, msgs: list[dict], policy: object, max_chars: int = 2_000) -> tuple:
    return on_both_cores(monkeypatch, built(msgs), policy, ReplayOptions(summarizer=StubSummarizer(max_chars)))


@pytest.fixture(scope="module")
def env():
    """An environment a hypothesis test may change at every example."""
    with pytest.MonkeyPatch.context() as mp:
        yield mp


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), SUMMARY, st.sampled_from([2_000, 2_000, 120, 1]))
def test_the_native_stub_summary_is_the_python_layers(env, msgs, summary, max_chars):
    a, b = _both(env, msgs, _policy(summary), max_chars)
    assert_same_run(a, b)
    assert a.summary.saved_transcripts == b.summary.saved_transcripts


def test_the_native_loop_makes_the_summary_itself_and_leaves_python_what_it_cannot_read(monkeypatch):
    """A summary of plain texts is made natively (the native run never asks Python's layer); one
    quoting a sized placeholder is Python's, as is every summary of a layer with an option the
    native loop does not make. (The python core runs its own loop: it never asks ``PythonSteps``.)"""
    made: list[int] = []
    real = keeping.PythonSteps.summary

    def counted(self, *args):
        made.append(args[0])
        return real(self, *args)

    monkeypatch.setattr(keeping.PythonSteps, "summary", counted)
    plain = [{"role": "user", "content": f"step {i} " + "word " * 60} for i in range(6)]
    msgs = [m for p in plain for m in (p, {"role": "assistant", "content": [{"type": "text", "text": "ok " * 50}]})]
    for options in ({}, {"ack": "Understood.", "keep_head": 1, "keep_tail": 2}):
        made.clear()
        a, b = _both(monkeypatch, msgs, _policy(options))
        assert_same_run(a, b)
        assert b.summary.summaries > 0 and made == []
    marked = [{**msgs[0], "content": f"{SIZED_MARK}[tool_result len=500] then"}, *msgs[1:]]
    made.clear()
    a, b = _both(monkeypatch, marked, _policy({}))
    assert_same_run(a, b)
    assert made  # (the summaries that quote the placeholder were Python's)
    for options in ({"rollback_if_larger": True}, {"keep_tail_fraction": 0.3}, {"keep_user_tokens": 100}):
        made.clear()
        a, b = _both(monkeypatch, msgs, _policy(options))
        assert_same_run(a, b)
        assert len(made) >= b.summary.summaries > 0

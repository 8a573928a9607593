"""Our preset checked against running code (#45 §4): anthropic-clear-tool-uses imitates the
Messages API's context editing; LangChain's ClearToolUsesEdit implements the same rule. Replayed
over the same sessions with the same token count and placeholder, they send the same context at
every call: a difference is a rule one of them has and the other has not."""

from __future__ import annotations

from dataclasses import replace

import pytest

from compactlab import load_policy, load_transcript
from compactlab.frameworks.against import differences, with_settings
from compactlab.synth import write

OURS = "[Old tool result content cleared]"
THEIRS = "[cleared]"
SAME = {OURS: "<cleared>", THEIRS: "<cleared>"}


def _pair(trigger: int | None = None):
    ours = load_policy("anthropic-clear-tool-uses")
    theirs = with_settings(load_policy("langchain-clear-tool-uses"), tokens="compactlab")
    if trigger is not None:
        ours = replace(ours, micro=replace(ours.micro, trigger_tokens=trigger))
        theirs = with_settings(theirs, trigger=trigger)
    return ours, theirs


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    path = tmp_path_factory.mktemp("s") / "session.jsonl"
    write(path, calls=90, seed=7)
    return load_transcript(str(path))


def test_the_preset_sends_what_langchains_code_sends_at_every_call(session):
    ours, theirs = _pair(trigger=25_000)
    assert differences(session, ours, theirs, SAME) == []


@pytest.mark.parametrize("rule,change", [
    # the API edits each request on the server, over the whole history the client keeps: a trigger
    # on the context as already cleared stops clearing until it grows past the trigger again
    ("the trigger counts the history", {"trigger_on": "context"}),
    # the API replaces every old result; the micro layer's default leaves one the placeholder
    # would not shorten (an empty result, say)
    ("every old result is cleared", {"clear_short": False}),
])
def test_each_rule_the_preset_was_given_is_one_the_running_code_has(session, rule, change):
    ours, theirs = _pair(trigger=25_000)
    before = replace(ours, micro=replace(ours.micro, **change))
    found = differences(session, before, theirs, SAME)
    assert found, rule
    assert all(d.tokens[0] >= d.tokens[1] for d in found)  # (the preset without it sends more)


def test_langchains_own_count_is_a_difference_of_the_presets_not_of_the_rule(session):
    """LangChain counts 4 characters of message text a token (count_tokens_approximately); the
    run's estimate counts the JSON sent. Where they disagree on the trigger, the contexts differ
    from the first call one of them clears until the other does, and never after."""
    ours, theirs = _pair(trigger=25_000)
    own = with_settings(theirs, tokens="langchain")
    found = differences(session, ours, own, SAME)
    calls = [d.call for d in found]
    assert calls and calls == list(range(calls[0], calls[0] + len(calls)))
    assert all(d.tokens[0] < d.tokens[1] for d in found)  # (here LangChain counts fewer: it clears later)


@pytest.mark.slow  # (every shared recording: CI runs it with pytest -m slow)
def test_on_every_shared_session_the_preset_sends_what_langchains_code_sends(shared_sessions):
    ours, theirs = _pair()
    for name, t in shared_sessions.items():
        assert differences(t, ours, theirs, SAME) == [], name

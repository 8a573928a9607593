"""Compaction steps of a user's own, for the tests of ``layers.custom`` (named as
``custom_steps:NAME``: the tests' folder is on sys.path)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class EndsSettings:
    keep: int = 4  # the last messages kept (from an assistant message on), besides the first


def keep_ends(messages, facts, settings):
    """The first message and the tail from the first assistant message among the last ``keep``:
    pair-safe (a tail never opens with results) and alternating (user, then assistant)."""
    if len(messages) <= settings.keep + 1:
        return messages
    tail = messages[-settings.keep:]
    while tail and tail[0]["role"] != "assistant":
        tail = tail[1:]
    return [messages[0], *tail]


keep_ends.settings = EndsSettings


def same(messages, facts, settings):
    return messages


def raises(messages, facts, settings):
    raise RuntimeError("the step's own bug")


def returns_none(messages, facts, settings):
    return None


def mutates(messages, facts, settings):
    if messages:
        messages[0]["content"] = "rewritten in place"
    return messages


def reorders(messages, facts, settings):
    return messages[::-1] if len(messages) > 1 else messages


def copies(messages, facts, settings):
    """Every message a copy: nothing is kept, everything is made anew (the cache is rewritten)."""
    return [dict(m) for m in messages]


def drops_calls(messages, facts, settings):
    """Every assistant message but the last dropped: their tool results are orphans (violations)."""
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    return [m for i, m in enumerate(messages) if m["role"] != "assistant" or i == last]


def exits(messages, facts, settings):
    """A step that ends the process it runs in (#55 §4): never a pass."""
    import sys

    sys.exit(0)


def interrupts(messages, facts, settings):
    raise KeyboardInterrupt


def prints(messages, facts, settings):
    """A step that prints, escape bytes and all: never into compactlab's output."""
    print("step says \x1b[31mred\x1b[0m")
    return messages


def tool_use_without_id(messages, facts, settings):
    return [*messages, {"role": "assistant", "content": [{"type": "tool_use", "name": "bash", "input": {}}]}]


def result_in_assistant(messages, facts, settings):
    return [*messages, {"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "y"}]}]


def twice_the_same_id(messages, facts, settings):
    call = {"type": "tool_use", "id": "dup", "name": "bash", "input": {}}
    return [*messages, {"role": "assistant", "content": [call]}, {"role": "user", "content": "next"},
            {"role": "assistant", "content": [dict(call)]}]


def mutates_a_block(messages, facts, settings):
    for m in messages:
        if isinstance(m["content"], list) and m["content"]:
            m["content"][0]["type"] = "text"
    return messages


def edits_a_deep_copy(messages, facts, settings):
    """Changes the first message through a deep copy: a new message, the rest kept."""
    import copy

    if not messages:
        return messages
    first = copy.deepcopy(messages[0])
    first["content"] = "edited"
    return [first, *messages[1:]]


UNCHANGED: list = []


def records_unchanged(messages, facts, settings):
    UNCHANGED.append((facts.call, facts.unchanged, len(messages)))
    return messages


def makes_too_much(messages, facts, settings):
    return [*messages, {"role": "user", "content": "x" * (3 << 20)}]


def empties(messages, facts, settings):
    """Every message dropped: each call sends none (a violation the policy introduced)."""
    return []

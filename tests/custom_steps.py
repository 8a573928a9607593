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

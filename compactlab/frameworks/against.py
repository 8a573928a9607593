"""A preset checked against running code (#45 §4): two policies replayed over one recording, and
the calls at which the contexts they send differ.

``anthropic-clear-tool-uses`` imitates the Messages API's context editing with the micro layer;
LangChain's ``ClearToolUsesEdit`` implements the same rule in code (``langchain-clear-tool-uses``).
``differences`` replays both and compares, call by call, the messages each would send, with each
policy's placeholder read as one (``same``): where they differ, the difference is a rule one of
them has and the other has not. The docs' page "Checked against running code" has the numbers.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import orjson

from ..engine.loop import replay
from ..engine.policy import Policy
from ..plain import dataclass
from ..transcripts import Transcript


@dataclass(frozen=True)
class Difference:
    """A call at which the two contexts sent differ: each one's tokens and messages, and the first
    message position where they part."""

    call: int
    tokens: tuple[int, int]
    messages: tuple[int, int]
    first: int


def differences(transcript: Transcript, a: Policy, b: Policy, same: dict[str, str] | None = None) -> list[Difference]:
    """The calls at which ``a`` and ``b`` send different contexts over ``transcript``; ``same``: texts
    read as one (each policy's placeholder, say), replaced in both before they are compared."""
    every = range(len(transcript.entries))  # (a call is a reply: there are fewer calls than messages)
    runs = [replay(transcript, policy, keep_contexts=every) for policy in (a, b)]
    out = []
    for ra, rb in zip(runs[0].calls, runs[1].calls):
        ma = [_normal(m, same) for m in runs[0].contexts[ra.call]]
        mb = [_normal(m, same) for m in runs[1].contexts[rb.call]]
        if ma != mb:
            first = next((i for i, (x, y) in enumerate(zip(ma, mb)) if x != y), min(len(ma), len(mb)))
            out.append(Difference(ra.call, (ra.tokens, rb.tokens), (len(ma), len(mb)), first))
    return out


def _normal(message: Any, same: dict[str, str] | None) -> bytes:
    data = orjson.dumps(message, option=orjson.OPT_SORT_KEYS)
    for text, instead in (same or {}).items():
        data = data.replace(orjson.dumps(text), orjson.dumps(instead))
    return data


def with_settings(policy: Policy, **settings: Any) -> Policy:
    """``policy`` with its own step's settings changed."""
    return replace(policy, custom=replace(policy.custom, settings={**policy.custom.settings, **settings}))

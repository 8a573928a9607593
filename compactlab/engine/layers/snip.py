"""L1 snip_compact: over ``max_messages``, keep the head and the tail, drop the middle.

``pair_safe = true`` is seed 000's cut: a head ending in a tool_use takes its results, a tail
starting with results takes their tool_use. ``"head"`` protects the head only (seed 004's
snippet). ``false`` is the naive cut of seed 001, which can split a pair.
"""

from __future__ import annotations

from typing import Annotated, Literal

from ..context import Context
from ...config import MAX_COUNT, Bound, LayerConfig, NonNegative, opt, section
from .base import NOTHING, LayerStats, RunEnv, pair_safe_head, pair_safe_tail
from .registry import register


@section
class SnipConfig(LayerConfig):
    """L1 snip_compact: keep head and tail messages, drop the middle."""

    max_messages: Annotated[int, Bound(ge=2, le=MAX_COUNT)] = opt(50, "snip when the context has more messages than this")
    keep_head: NonNegative = opt(3, "messages kept from the start")
    pair_safe: bool | Literal["head"] = opt(
        True, "move the cut so no tool pair is split: true, false (naive cut) or 'head' (head only)")
    placeholder: str = opt("[snipped {n} messages]", "user message put in place of the middle")

    def __post_init__(self) -> None:
        if self.keep_head >= self.max_messages:
            raise ValueError(f"keep_head ({self.keep_head}) must be smaller than max_messages ({self.max_messages})")


@register("snip", SnipConfig, cheap=True)
def snip(context: Context, config: SnipConfig, env: RunEnv) -> tuple[Context, LayerStats]:
    entries = context.entries
    n = len(entries)
    if n <= config.max_messages:
        return context, NOTHING
    stats = LayerStats()
    keep_tail = config.max_messages - config.keep_head
    head_end, tail_start = config.keep_head, n - keep_tail
    if config.pair_safe:
        head_end = pair_safe_head(entries, head_end)
    if config.pair_safe is True:
        tail_start = pair_safe_tail(entries, tail_start)
    if head_end >= tail_start:
        return context, NOTHING
    snipped = tail_start - head_end
    message = {"role": "user", "content": config.placeholder.replace("{n}", str(snipped))}
    stats.snipped = snipped
    here = entries[head_end]
    if here.origin < 0 and here.message == message:
        # the placeholder already there, to the letter: the prefix through it is what was sent
        # (and cached); the change starts after it
        placeholder = here
        stats.changed_at(head_end + 1)
    else:
        placeholder = env.new_entry(message, by="snip")
        stats.changed_at(head_end)
    return context.spliced(head_end, [placeholder], tail_start), stats

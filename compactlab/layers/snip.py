"""L1 snip_compact: over ``max_messages``, keep the head and the tail, drop the middle.

``pair_safe = true`` is seed 000's cut: a head ending in a tool_use takes its results, a tail
starting with results takes their tool_use. ``"head"`` protects the head only (seed 004's
snippet). ``false`` is the naive cut of seed 001, which can split a pair.
"""

from __future__ import annotations

from ..context import Context
from ..policy import SnipConfig
from .base import NOTHING, LayerStats, RunEnv, pair_safe_head, pair_safe_tail


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
    placeholder = env.new_entry({"role": "user", "content": config.placeholder.replace("{n}", str(snipped))})
    stats.snipped = snipped
    stats.changed_at(head_end)
    return context.spliced(head_end, [placeholder], tail_start), stats
